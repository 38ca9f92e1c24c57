#!/usr/bin/env bash
# cuda_check.sh — the CUDA part of `make test`, for machines without a GPU:
# vets the cuda build (`go vet -tags cuda ./...`), compiles and links every
# test binary that has cuda-tagged tests, and builds `train` with the CUDA
# device, all against the CUDA toolkit's stub libcuda.so. Nothing is run:
# gorgonia.org/cu exits at start where there is no GPU (docs/GPU.md).
#
# Without the toolkit (a laptop) it prints "CUDA build skipped: <reason>"
# and exits 0. scripts/install_cuda_toolkit.sh installs the toolkit.
#
# Environment: GO (default go); CUDA_STUBS, the directory of the stub
# libcuda.so (default: the first of the usual places that has one).
set -euo pipefail
cd "$(dirname "$0")/.."
GO="${GO:-go}"

skip() {
	echo "CUDA build skipped: $*"
	exit 0
}

stubs="${CUDA_STUBS:-}"
if [ -z "$stubs" ]; then
	for d in /usr/lib/x86_64-linux-gnu/stubs /usr/local/cuda/lib64/stubs /usr/local/cuda/targets/x86_64-linux/lib/stubs /usr/lib/aarch64-linux-gnu/stubs; do
		if [ -e "$d/libcuda.so" ]; then
			stubs="$d"
			break
		fi
	done
fi
[ -n "$stubs" ] && [ -e "$stubs/libcuda.so" ] || skip "no stub libcuda.so (install the CUDA toolkit: scripts/install_cuda_toolkit.sh, or set CUDA_STUBS)"
[ -e /usr/include/cuda.h ] || [ -e /usr/local/cuda/include/cuda.h ] || skip "no cuda.h (CUDA toolkit headers) in /usr/include or /usr/local/cuda/include"
cc="$("$GO" env CC)"
command -v "${cc%% *}" >/dev/null 2>&1 || skip "no C compiler ($cc) for cgo"

export CGO_ENABLED=1
export CGO_LDFLAGS="-L$stubs ${CGO_LDFLAGS:-}"
# go-nvml's header marks many functions deprecated: quiet, not wrong.
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Wno-deprecated-declarations"

start=$(date +%s)
echo "cuda build: go vet -tags cuda ./... (stub libcuda from $stubs)"
"$GO" vet -tags cuda ./...

# Packages with test files that carry the cuda build tag.
pkgs=()
while read -r dir pkg; do
	for f in "$dir"/*_test.go; do
		[ -e "$f" ] || continue
		if grep -Eq '^//go:build (.*[^!])?\bcuda\b' "$f"; then
			pkgs+=("$pkg")
			break
		fi
	done
done < <("$GO" list -tags cuda -f '{{.Dir}} {{.ImportPath}}' ./...)
for p in "${pkgs[@]}"; do
	echo "cuda build: go test -tags cuda -c $p"
	"$GO" test -tags cuda -c -o /dev/null "$p"
done
echo "cuda build: go build -tags cuda ./cmd/train"
"$GO" build -tags cuda -o /dev/null ./cmd/train
echo "cuda build: ok (${#pkgs[@]} test binaries linked: ${pkgs[*]:-none}; $(( $(date +%s) - start )) s)"
