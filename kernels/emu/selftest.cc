// selftest.cc — kernels that exercise the emulation itself (not part of
// voxtrain's GPU code; registered under names starting "emu_selftest_",
// which package kernels does not list). TestEmulation* use them to check
// that the barrier really synchronises, that a missing one shows, that divergent __syncthreads and
// out-of-bounds writes are reported, and that atomics are atomic.
#include "cuda_emu.h"

namespace vt_selftest {

// Each thread writes its id to shared memory, syncs, then reads its
// neighbour's: correct only if the barrier holds every thread back.
__global__ void emu_selftest_barrier(int* out)
{
    __shared__ int s[1024];
    const int t = threadIdx.x;
    s[t] = t + 1000 * (int)blockIdx.x;
    __syncthreads();
    const int nb = (t + 1) % (int)blockDim.x;
    out[blockIdx.x * blockDim.x + t] = s[nb];
    __syncthreads();
}

// emu_selftest_barrier without its first barrier: invalid CUDA, whose reads
// the emulation's alternating thread order makes come out wrong.
__global__ void emu_selftest_nobarrier(int* out)
{
    __shared__ int s[1024];
    const int t = threadIdx.x;
    s[t] = t + 1000 * (int)blockIdx.x;
    const int nb = (t + 1) % (int)blockDim.x;
    out[blockIdx.x * blockDim.x + t] = s[nb];
    __syncthreads();
}

// Threads with even ids skip the barrier: invalid CUDA.
__global__ void emu_selftest_divergent(int* out)
{
    if (threadIdx.x % 2 == 1) {
        __syncthreads();
    }
    out[threadIdx.x] = 1;
}

// Thread 0 writes one int past n.
__global__ void emu_selftest_oob(int* out, int n)
{
    if (threadIdx.x == 0) {
        out[n] = 1;
    }
}

// Every thread of every block adds 1 to *counter and lowers *lowest to
// its global id.
__global__ void emu_selftest_atomics(int* counter, int* lowest)
{
    atomicAdd(counter, 1);
    atomicMin(lowest, (int)(blockIdx.x * blockDim.x + threadIdx.x));
}

} // namespace vt_selftest

static const bool registered_selftest = (
    cuda_emu::add("emu_selftest_barrier", &vt_selftest::emu_selftest_barrier),
    cuda_emu::add("emu_selftest_nobarrier", &vt_selftest::emu_selftest_nobarrier),
    cuda_emu::add("emu_selftest_divergent", &vt_selftest::emu_selftest_divergent),
    cuda_emu::add("emu_selftest_oob", &vt_selftest::emu_selftest_oob),
    cuda_emu::add("emu_selftest_atomics", &vt_selftest::emu_selftest_atomics),
    true);
