#!/usr/bin/env bash
# Alternates PyTorch's and voxtrain's CPU training step of nnU-Net's
# residual-encoder U-Net (resenc.yaml, torch_resenc_step.py), ROUNDS rounds,
# one JSON line per run on stdout (docs/BENCHMARKS.md has the numbers).
#
#   scripts/bench_resenc/run.sh PYTHON TRAIN_BINARY [ROUNDS]
set -euo pipefail
py=$1 train=$2 rounds=${3:-3}
here=$(dirname "$0")
for r in $(seq "$rounds"); do
	echo "round $r: load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
	"$py" "$here/torch_resenc_step.py" --steps 8 --warmup 2 --threads 2 2>/dev/null
	"$train" bench-step --config "$here/resenc.yaml" --threads 2 --steps 8 --warmup 2 --json
done
