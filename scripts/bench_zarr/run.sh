#!/usr/bin/env bash
# Side-by-side rounds of the OME-Zarr random-patch benchmark (issue 15):
# each round runs every reader once, the order rotated from round to round
# so that no side always runs first or last on a machine whose speed drifts.
#
#   scripts/bench_zarr/run.sh PYTHON ZARRREAD DIR [ROUNDS] [THREADS]
#
# PYTHON has zarr and tensorstore (see docs/BENCHMARKS.md), ZARRREAD is
# `go build ./scripts/bench_zarr/zarrread`, DIR is what `bench.py make`
# wrote. Prints one JSON line per run, with its round.
set -euo pipefail
py=$1 zr=$2 dir=$3 rounds=${4:-3} threads=${5:-2}
here=$(dirname "$0")
cache=$((256 << 20))
readers=(
	"$zr -dir $dir -threads $threads"
	"$py $here/bench.py read tensorstore $dir $threads"
	"$py $here/bench.py read zarr $dir $threads"
	"$zr -dir $dir -threads $threads -cache-bytes $cache"
	"$py $here/bench.py read tensorstore $dir $threads $cache"
	"$py $here/bench.py read zarr $dir $threads $cache"
)
n=${#readers[@]}
for ((r = 0; r < rounds; r++)); do
	for ((k = 0; k < n; k++)); do
		cmd=${readers[$(((k + r * 2) % n))]}
		printf '{"round": %d, "run": ' "$r"
		$cmd | tr -d '\n'
		echo '}'
	done
done
