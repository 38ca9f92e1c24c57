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
# steps (default: all, in this order): info tests bench ops torch demo cli
# (cli: bench-step, validate and predict on the GPU from the demo's run).
# DEMO_DEVICE picks the demo's --device (default cuda; cuda,bf16 say) and
# DEMO_EPOCHS its epochs (default 3; the full demo is 16).
# Each step has its own time limit, so one that hangs cannot eat the others'
# time; a failing step is reported and the next one runs.
set -uo pipefail
bin="$(cd "${1:?usage: gpu_suite.sh BIN OUTDIR [steps...]}" && pwd)"
out="${2:?usage: gpu_suite.sh BIN OUTDIR [steps...]}"
shift 2
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(info tests bench ops torch demo cli)
mkdir -p "$out"
cd "$(dirname "$0")/.."

# cuBLAS: Python wheels (nvidia-cublas) and toolkits keep it outside the
# loader's search path; hand every copy found to the device's search.
if [ -z "${VOXTRAIN_CUBLAS:-}" ]; then
	libs=$(find /usr/local/cuda* /opt /usr/lib /usr/local/lib -name 'libcublas.so.1[0-9]*' 2>/dev/null | grep -v Lt | sort -r | tr '\n' ':')
	export VOXTRAIN_CUBLAS="${libs%:}"
fi

run() { # name limit command...
	local name=$1 limit=$2
	shift 2
	echo "== $name (limit ${limit}s): $*"
	local t0=$SECONDS
	timeout -k 5 "$limit" "$@" 2>&1 | tee "$out/$name.txt"
	local rc=${PIPESTATUS[0]}
	echo "== $name: exit $rc after $((SECONDS - t0)) s"
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
			python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())'
		} 2>&1 | tee "$out/info.txt"
		;;
	tests) run gpu-tests 150 "$bin/gpu.test" -test.v -test.timeout 140s ;;
	bench) run gpu-bench 120 "$bin/gpu.test" -test.run '^$' -test.bench 'H2D|UNetStep$' -test.benchtime 5x -test.timeout 110s ;;
	ops) run gpu-ops 120 "$bin/gpu.test" -test.run '^$' -test.bench UNetStepOps -test.benchtime 3x -test.timeout 110s ;;
	torch) run torch-cuda 170 python3 gpu/testdata/torch_unet_step_cuda.py --steps 10 --warmup 3 ;;
	demo)
		dev="${DEMO_DEVICE:-cuda}"
		runs="/tmp/vxruns-${dev//[^a-z0-9]/-}"
		run demo-cuda 150 "$bin/train" demo --device "$dev" --output-dir "$runs" --epochs "${DEMO_EPOCHS:-3}"
		find "$runs" -name metrics.jsonl -exec cp {} "$out/demo-metrics.jsonl" \; 2>/dev/null
		;;
	cli)
		run cli-bench-step 150 bash -c "'$bin/train' bench-step --device cuda --batch 2 --patch 64 &&
			'$bin/train' bench-step --device cuda,bf16 --config configs/nnunet_3d_fullres.yaml --batch 2 --patch 128 --steps 5"
		ckpt=$(ls -d /tmp/vxruns-*/demo/fold_0/run_0/checkpoints/best 2>/dev/null | head -1)
		if [ -z "$ckpt" ]; then
			echo "cli: no demo run to validate (run the demo step first)"
			continue
		fi
		run cli-validate 150 "$bin/train" validate --checkpoint "$ckpt" --device cuda,bf16 --mirror --hd95 --output /tmp/vxval
		run cli-predict 60 bash -c "'$bin/train' predict --checkpoint '$ckpt' --device cuda \
			--input testdata/demo/imagesTr/hippocampus_001.nii.gz --output /tmp/vxpred.nii.gz &&
			'$bin/train' info testdata/demo/imagesTr/hippocampus_001.nii.gz /tmp/vxpred.nii.gz"
		;;
	*) echo "unknown step $s" ;;
	esac
done
