// cuda_emu.h — runs voxtrain's CUDA C kernels on the host, compiled by g++
// (C++20), with no CUDA toolkit.
//
// Model: a launch runs the grid's blocks one after another (x fastest, then
// y, z). Within a block every CUDA thread is a fiber (fiber.cc): a
// cooperative thread with its own stack on the launching OS thread. Each
// runs until it reaches a __syncthreads() or the end of the kernel; when
// every thread of the block has, the next round starts, so __syncthreads()
// is a real barrier. Rounds alternate the order the threads run in, so a
// missing barrier shows as a stale shared-memory read in one of the orders.
// Because blocks never overlap, __shared__ is plain `static` storage.
// threadIdx/blockIdx/blockDim/gridDim are thread_local, set by the
// scheduler before it switches to a thread.
//
// The barrier also checks the CUDA rule that every thread of a block reaches
// the same __syncthreads() calls: a thread that leaves the kernel (or the
// block) while others wait at a __syncthreads() breaks the barrier, the
// launch finishes without deadlocking and reports "divergent __syncthreads".
//
// Atomics map to std::atomic_ref; the math functions the kernels use come
// from <math.h> (glibc), the bit casts from std::bit_cast. Not emulated:
// warp-level intrinsics (shuffles, votes, warp-synchronous code), dynamic
// shared memory, streams, cooperative groups — the kernels avoid them.
#ifndef VOXTRAIN_CUDA_EMU_H
#define VOXTRAIN_CUDA_EMU_H

#include <math.h>

#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

// Never fuse a*b+c into an FMA (the default of g++ where the target has
// FMA, e.g. arm64): the PTX is built with -fmad=false and package cpu's Go
// code does not fuse on amd64, so the emulation rounds as they do. (cgo does
// not accept -ffp-contract=off as a flag.)
#pragma GCC optimize("fp-contract=off")

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static

// dim3 and uint3 as CUDA declares them (unsigned components).
struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
};
using uint3 = dim3;

inline thread_local uint3 threadIdx{0, 0, 0};
inline thread_local uint3 blockIdx{0, 0, 0};
inline thread_local dim3 blockDim{1, 1, 1};
inline thread_local dim3 gridDim{1, 1, 1};

namespace cuda_emu {

// What a thread arrives at the block barrier for.
enum Arrival { kSync = 1, kBlockEnd = 2 };

// run_blocks (fiber.cc) runs body(ctx) once for every CUDA thread of every
// block of grid × block, blocks one after another, each block's threads
// as fibers on the calling OS thread; it sets threadIdx, blockIdx,
// blockDim and gridDim for each. It returns "" or an error message. The
// geometry must be valid (run_grid checks it).
std::string run_blocks(dim3 grid, dim3 block, void (*body)(void*), void* ctx);

// arrive (fiber.cc) suspends the calling CUDA thread at the block barrier
// until every thread of its block has arrived (for the same reason) or the
// block is abandoned because they arrived for different reasons.
void arrive(Arrival why);

// run_grid runs body() once per CUDA thread of every block of the grid and
// returns "" or an error message.
template <typename Body>
std::string run_grid(dim3 grid, dim3 block, Body body)
{
    const unsigned long long nt = (unsigned long long)block.x * block.y * block.z;
    if (block.x == 0 || block.y == 0 || block.z == 0 || nt > 1024 || block.z > 64) {
        return "invalid block dimensions (CUDA allows at most 1024 threads, z <= 64)";
    }
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 || grid.z > 65535 || grid.x > 0x7fffffffu) {
        return "invalid grid dimensions";
    }
    return run_blocks(grid, block, [](void* b) { (*static_cast<Body*>(b))(); }, &body);
}

// launch runs kernel k on grid × block with the given arguments (converted
// to k's parameter types) and returns "" or an error message: the C++
// counterpart of kernel<<<grid, block>>>(args...), for host code that calls
// kernels directly rather than through the registry.
template <typename... A, typename... Args>
std::string launch(void (*k)(A...), dim3 grid, dim3 block, Args... args)
{
    static_assert(sizeof...(A) == sizeof...(Args), "launch: wrong number of kernel arguments");
    const std::tuple<A...> vals{static_cast<A>(args)...};
    return run_grid(grid, block, [&] { std::apply(k, vals); });
}

// Kernel parameter kinds, one letter each, as package kernels spells them:
// p pointer, i int, f float, d double.
template <typename T>
constexpr char param_kind()
{
    if constexpr (std::is_pointer_v<T>) {
        return 'p';
    } else if constexpr (std::is_same_v<T, int>) {
        return 'i';
    } else if constexpr (std::is_same_v<T, float>) {
        return 'f';
    } else if constexpr (std::is_same_v<T, double>) {
        return 'd';
    } else {
        static_assert(!sizeof(T), "kernel parameter type not supported by the emulation");
        return '?';
    }
}

// Entry is a registered kernel: its parameter kinds and a runner that
// unpacks cuLaunchKernel-style arguments (args[i] points at parameter i).
struct Entry {
    std::string params;
    std::function<std::string(dim3, dim3, void**)> run;
};

inline std::map<std::string, Entry>& registry()
{
    static std::map<std::string, Entry> r;
    return r;
}

template <typename T>
T load_arg(void* p)
{
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
}

template <typename... A, std::size_t... I>
std::string invoke(void (*k)(A...), dim3 grid, dim3 block, void** args, std::index_sequence<I...>)
{
    const std::tuple<A...> vals{load_arg<A>(args[I])...};
    return run_grid(grid, block, [&] { std::apply(k, vals); });
}

// add registers kernel k under name; every .cc file of package emu registers
// the kernels of its .cu file at static-initialisation time.
template <typename... A>
bool add(const char* name, void (*k)(A...))
{
    registry()[name] = Entry{std::string{param_kind<A>()...}, [k](dim3 g, dim3 b, void** args) {
                                 return invoke(k, g, b, args, std::index_sequence_for<A...>{});
                             }};
    return true;
}

} // namespace cuda_emu

// __syncthreads waits until every thread of the block has arrived.
inline void __syncthreads()
{
    cuda_emu::arrive(cuda_emu::kSync);
}

inline unsigned int __float_as_uint(float f) { return std::bit_cast<unsigned int>(f); }
inline float __uint_as_float(unsigned int u) { return std::bit_cast<float>(u); }

// Atomics (device-wide or on shared memory: both are plain memory here).
// They return the old value, as CUDA's do.
template <typename T>
inline T atomicAdd(T* addr, T val)
{
    return std::atomic_ref<T>(*addr).fetch_add(val);
}

inline int atomicMin(int* addr, int val)
{
    std::atomic_ref<int> a(*addr);
    int old = a.load();
    while (val < old && !a.compare_exchange_weak(old, val)) {
    }
    return old;
}

inline int atomicMax(int* addr, int val)
{
    std::atomic_ref<int> a(*addr);
    int old = a.load();
    while (val > old && !a.compare_exchange_weak(old, val)) {
    }
    return old;
}

inline int atomicCAS(int* addr, int compare, int val)
{
    std::atomic_ref<int>(*addr).compare_exchange_strong(compare, val);
    return compare;
}

#endif // VOXTRAIN_CUDA_EMU_H
