#!/usr/bin/env bash
# gpu_suite.sh — runs voxtrain's GPU checks on a GPU node, in one go, and
# writes every log into an output directory (docs/GPU.md, "The GPU test suite").
#
# The node needs no Go: build the binaries on a machine with the CUDA
# toolkit first (scripts/cuda_check.sh links the same ones):
#
#   CGO_ENABLED=1 CGO_LDFLAGS=-L/usr/lib/x86_64-linux-gnu/stubs go test -tags cuda -c -o BIN/gpu.test ./gpu
#   CGO_ENABLED=1 CGO_LDFLAGS=-L/usr/lib/x86_64-linux-gnu/stubs go build -tags cuda -o BIN/train ./cmd/train
#
# then, from the repository root on the node:
#
#   scripts/gpu_suite.sh BIN OUTDIR [steps...]
#
# steps (default: all, in this order): info tests bench ops torch compile demo nccl cli
# (bf16mem, not in the default list: the nnU-Net 2×128³ bf16 step's memory with
# bf16 activations and gradients, with float32 gradients, with float32
# activations, and PyTorch autocast's, issue 12's memory line);
# (tests: the GPU test suite with the own convolutions, then with cuDNN's;
# compile: PyTorch with torch.compile; nccl: the demo with NCCL forced at
# world size 1 and without, for NCCL's cost per step; cli: bench-step, validate and
# predict on the GPU from the demo's run).
# BENCH is the benchmarks' -test.bench pattern (default 'H2D|UNetStep$'),
# OPS the ops step's (default 'UNetStepOps': BenchmarkUNetStepOps, by op
# group, and BenchmarkUNetStepOpsByShape, nnU-Net's bf16 and tf32 steps by
# op and U-Net level, with the GB/s of the norms) and OPS_CONV its
# -gpu.conv (default auto); TORCH_ARGS and COMPILE_ARGS are added to the
# PyTorch script's arguments in the torch and compile steps.
# DEMO_DEVICE picks the demo's --device (default cuda; several separated
# by spaces run one after the other: "cuda,fp32 cuda,bf16") and
# DEMO_EPOCHS its epochs (default 3; the full demo is 16).
# With TAR_TO set, every log is packed into that .tgz after each step
# (so a run cut short still hands back what it has). RUNS_DIR (default
# /tmp) holds the demo's runs and the cli step's outputs.
# Each step has its own time limit, so one that hangs cannot eat the others'
# time; a failing step is reported and the next one runs.
set -uo pipefail
bin="$(cd "${1:?usage: gpu_suite.sh BIN OUTDIR [steps...]}" && pwd)"
out="${2:?usage: gpu_suite.sh BIN OUTDIR [steps...]}"
shift 2
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(info tests bench ops torch compile demo nccl cli)
mkdir -p "$out"
tmp="${RUNS_DIR:-/tmp}"
cd "$(dirname "$0")/.."

# cuBLAS: Python wheels (nvidia-cublas) and toolkits keep it outside the
# loader's search path; hand every copy found to the device's search.
if [ -z "${VOXTRAIN_CUBLAS:-}" ]; then
	libs=$(find /usr/local/cuda* /opt /usr/lib /usr/local/lib -name 'libcublas.so.1[0-9]*' 2>/dev/null | grep -v Lt | sort -r | tr '\n' ':')
	export VOXTRAIN_CUBLAS="${libs%:}"
fi

# cuDNN: PyTorch's wheels carry it (site-packages/nvidia/cudnn/lib) with
# the libraries it loads itself (cuBLAS, NVRTC): hand the device the
# wheel's libcudnn — the one PyTorch uses, so both sides of a comparison
# run the same cuDNN — else the system's, and put every wheel library
# directory on the loader's path.
if [ -z "${VOXTRAIN_CUDNN:-}" ]; then
	cudnn=$(find /opt /usr/local -path '*site-packages/nvidia/*' -name 'libcudnn.so.[89]' 2>/dev/null | sort -r | head -1)
	[ -n "$cudnn" ] || cudnn=$(find /usr/local /usr/lib -name 'libcudnn.so.[89]' 2>/dev/null | sort -r | head -1)
	[ -n "$cudnn" ] && export VOXTRAIN_CUDNN="$cudnn"
fi
# NCCL (libnccl.so.2): PyTorch's wheels carry it in
# site-packages/nvidia/nccl/lib; hand the device the wheel's, else the
# system's.
if [ -z "${VOXTRAIN_NCCL:-}" ]; then
	nccl=$(find /opt /usr/local -path '*site-packages/nvidia/nccl/*' -name 'libnccl.so.2' 2>/dev/null | sort -r | head -1)
	[ -n "$nccl" ] || nccl=$(find /usr/local /usr/lib -name 'libnccl.so.2' 2>/dev/null | sort -r | head -1)
	[ -n "$nccl" ] && export VOXTRAIN_NCCL="$nccl"
fi
wheel_libs=$(find /opt /usr/local -path '*site-packages/nvidia/*' -name 'lib*.so*' -printf '%h\n' 2>/dev/null | sort -u | tr '\n' ':')
export LD_LIBRARY_PATH="${wheel_libs}${LD_LIBRARY_PATH:-}"
export PYTHONUNBUFFERED=1
export VOXTRAIN_CUDNN_CACHE="${VOXTRAIN_CUDNN_CACHE:-$out/cudnn-algorithms.json}"

pack() {
	[ -n "${TAR_TO:-}" ] && tar czf "$TAR_TO.tmp" -C "$out" . && mv "$TAR_TO.tmp" "$TAR_TO"
	return 0
}

run() { # name limit command...
	local name=$1 limit=$2
	shift 2
	echo "== $name (limit ${limit}s): $*"
	local t0=$SECONDS
	timeout -k 5 "$limit" "$@" 2>&1 | tee "$out/$name.txt"
	local rc=${PIPESTATUS[0]}
	echo "== $name: exit $rc after $((SECONDS - t0)) s"
	pack
}

for s in "${steps[@]}"; do
	case $s in
	info)
		{
			date -u
			nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
			nvidia-smi | head -4
			nproc
			grep -m1 'model name' /proc/cpuinfo
			echo "VOXTRAIN_CUBLAS=$VOXTRAIN_CUBLAS"
			echo "VOXTRAIN_CUDNN=${VOXTRAIN_CUDNN:-}"
			echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
			python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())'
		} 2>&1 | tee "$out/info.txt"
		pack
		;;
	tests)
		run gpu-tests-own 150 "$bin/gpu.test" -test.v -test.timeout 140s -gpu.conv own
		run gpu-tests-cudnn 150 "$bin/gpu.test" -test.v -test.timeout 140s -gpu.conv cudnn
		;;
	bench) run gpu-bench 300 "$bin/gpu.test" -test.run '^$' -test.bench "${BENCH:-H2D|UNetStep\$}" -test.benchtime 5x -test.timeout 290s ;;
	ops) run gpu-ops 120 "$bin/gpu.test" -test.run '^$' -test.bench "${OPS:-UNetStepOps}" -test.benchtime 3x -test.timeout 110s -gpu.conv "${OPS_CONV:-auto}" ;;
	# shellcheck disable=SC2086 # word splitting of the extra arguments is wanted
	torch) run torch-cuda 170 python3 gpu/testdata/torch_unet_step_cuda.py --steps 10 --warmup 3 ${TORCH_ARGS:-} ;;
	# shellcheck disable=SC2086
	compile) run torch-compile 240 python3 gpu/testdata/torch_unet_step_cuda.py --steps 10 --warmup 3 --compile ${COMPILE_ARGS:-} ;;
	demo)
		for dev in ${DEMO_DEVICE:-cuda}; do
			tag="${dev//[^a-z0-9]/-}"
			runs="$tmp/vxruns-$tag"
			run "demo-$tag" 150 "$bin/train" demo --device "$dev" --output-dir "$runs" --epochs "${DEMO_EPOCHS:-3}"
			find "$runs" -name metrics.jsonl -exec cp {} "$out/demo-metrics-$tag.jsonl" \; 2>/dev/null
			pack
		done
		;;
	nccl)
		# NCCL at world size 1 (VOXTRAIN_DIST_BACKEND=nccl forces the job's
		# communicator on one process): the demo trained with the
		# gradients all-reduced by NCCL on device memory, then without,
		# the same epochs; each epoch's samples_per_s in the two
		# metrics.jsonl copies is the step with and without NCCL.
		for mode in nccl none; do
			runs="$tmp/vxruns-nccl-$mode"
			rm -rf "$runs"
			if [ "$mode" = nccl ]; then
				run "nccl-demo-$mode" 150 env VOXTRAIN_DIST_BACKEND=nccl NCCL_DEBUG=WARN \
					"$bin/train" demo --device cuda --output-dir "$runs" --epochs "${DEMO_EPOCHS:-3}"
			else
				run "nccl-demo-$mode" 150 "$bin/train" demo --device cuda --output-dir "$runs" --epochs "${DEMO_EPOCHS:-3}"
			fi
			find "$runs" -name metrics.jsonl -exec cp {} "$out/nccl-metrics-$mode.jsonl" \; 2>/dev/null
		done
		for mode in nccl none; do
			f="$out/nccl-metrics-$mode.jsonl"
			[ -e "$f" ] && echo "nccl timing ($mode): samples_per_s by epoch: $(grep -o '"samples_per_s":[0-9.e+-]*' "$f" | cut -d: -f2 | tr '\n' ' ')"
		done | tee "$out/nccl-timing.txt"
		pack
		;;
	bf16mem)
		# Issue 12's memory line in one place: the nnU-Net 3d_fullres
		# 2×1×128³ bf16 step with bf16 activations and gradients (the
		# default), with float32 gradients, with float32 activations,
		# then PyTorch autocast on the same GPU in the same run (its
		# peak_mib beside bench-step's peak lines).
		for mode in "" VOXTRAIN_BF16_GRADIENTS=0 VOXTRAIN_BF16_ACTIVATIONS=0; do
			tag=${mode:-default}
			run "bf16mem-${tag//[^a-zA-Z0-9]/-}" 100 env ${mode:+"$mode"} "$bin/train" bench-step --device cuda,bf16 \
				--config configs/nnunet_3d_fullres.yaml --batch 2 --patch 128 --steps 5
		done
		run bf16mem-torch 120 python3 gpu/testdata/torch_unet_step_cuda.py --steps 5 --warmup 2 \
			--configs nnunet-2x128 --maths bf16
		;;
	cli)
		run cli-bench-step 150 bash -c "'$bin/train' bench-step --device cuda --batch 2 --patch 64 &&
			'$bin/train' bench-step --device cuda,bf16 --config configs/nnunet_3d_fullres.yaml --batch 2 --patch 128 --steps 5"
		ckpt=$(ls -d "$tmp"/vxruns-*/demo/fold_0/run_0/checkpoints/best 2>/dev/null | head -1)
		if [ -z "$ckpt" ]; then
			echo "cli: no demo run to validate (run the demo step first)"
			continue
		fi
		run cli-validate 150 "$bin/train" validate --checkpoint "$ckpt" --device cuda,bf16 --mirror --hd95 --output "$tmp/vxval"
		run cli-predict 60 bash -c "'$bin/train' predict --checkpoint '$ckpt' --device cuda \
			--input testdata/demo/imagesTr/hippocampus_001.nii.gz --output '$tmp/vxpred.nii.gz' &&
			'$bin/train' info testdata/demo/imagesTr/hippocampus_001.nii.gz '$tmp/vxpred.nii.gz'"
		;;
	*) echo "unknown step $s" ;;
	esac
done
