#!/usr/bin/env bash
# install_cuda_toolkit.sh — make sure the CUDA toolkit that the cuda build
# needs is installed: nvcc, the headers (cuda.h) and the stub libcuda.so to
# link against (no GPU or driver is needed to build). Called by .ci/run.
#
# When something is missing and apt-get can be used as root, it installs
# Debian's CUDA 11.8 toolkit (packages nvidia-cuda-toolkit, nvidia-cuda-dev
# from the contrib and non-free components, which it enables in the apt
# sources first; about 3 minutes). Idempotent: with everything present it
# only says so. Where it cannot install (not root, no apt) it says why and
# exits 0: scripts/cuda_check.sh then reports the CUDA build as skipped. A
# failed installation exits non-zero, so CI does not silently skip the
# CUDA build.
set -euo pipefail

arch_dir=/usr/lib/x86_64-linux-gnu
missing=()
command -v nvcc >/dev/null 2>&1 || missing+=("nvcc")
[ -e /usr/include/cuda.h ] || [ -e /usr/local/cuda/include/cuda.h ] || missing+=("cuda.h")
[ -e "$arch_dir/stubs/libcuda.so" ] || [ -e /usr/local/cuda/lib64/stubs/libcuda.so ] || missing+=("stub libcuda.so")

if [ ${#missing[@]} -eq 0 ]; then
	echo "install_cuda_toolkit: CUDA toolkit present ($(nvcc --version | grep -o 'release [0-9.]*' || echo 'nvcc')), nothing to do"
	exit 0
fi
echo "install_cuda_toolkit: missing: ${missing[*]}"

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "install_cuda_toolkit: cannot install (needs apt-get as root); the CUDA build will be skipped"
	exit 0
fi

# Enable contrib and non-free (Debian's CUDA packages live there).
enable_components() {
	local f=/etc/apt/sources.list.d/debian.sources
	if [ -f "$f" ]; then
		# deb822: extend every Components: line that lacks them.
		sed -i -E '/^Components:/ { / contrib( |$)/! s/$/ contrib/ }' "$f"
		sed -i -E '/^Components:/ { / non-free( |$)/! s/$/ non-free/ }' "$f"
		echo "install_cuda_toolkit: components in $f: $(grep -m1 '^Components:' "$f" | cut -d: -f2-)"
	elif [ -f /etc/apt/sources.list ]; then
		sed -i -E '/^deb(-src)? / { / contrib( |$)/! s/$/ contrib/ }' /etc/apt/sources.list
		sed -i -E '/^deb(-src)? / { / non-free( |$)/! s/$/ non-free/ }' /etc/apt/sources.list
		echo "install_cuda_toolkit: enabled contrib non-free in /etc/apt/sources.list"
	else
		echo "install_cuda_toolkit: no Debian apt sources found to enable non-free in" >&2
		return 1
	fi
}
enable_components

export DEBIAN_FRONTEND=noninteractive
start=$(date +%s)
echo "install_cuda_toolkit: apt-get update"
apt-get update -qq
echo "install_cuda_toolkit: apt-get install nvidia-cuda-toolkit nvidia-cuda-dev"
apt-get install -y -qq nvidia-cuda-toolkit nvidia-cuda-dev >/tmp/install_cuda_toolkit.log 2>&1 || {
	echo "install_cuda_toolkit: apt-get install failed; last lines of /tmp/install_cuda_toolkit.log:" >&2
	tail -n 30 /tmp/install_cuda_toolkit.log >&2
	exit 1
}
command -v nvcc >/dev/null 2>&1 && [ -e "$arch_dir/stubs/libcuda.so" ] || {
	echo "install_cuda_toolkit: installed, but nvcc or $arch_dir/stubs/libcuda.so is still missing" >&2
	exit 1
}
echo "install_cuda_toolkit: installed $(nvcc --version | grep -o 'release [0-9.]*') in $(( $(date +%s) - start )) s"
