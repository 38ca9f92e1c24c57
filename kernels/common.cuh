// common.cuh — definitions shared by voxtrain's CUDA kernels.
//
// Every .cu file in kernels/ is compiled twice:
//   * by nvcc (kernels/gen_ptx.sh) into PTX for compute_80, embedded in the
//     Go binary and loaded by package gpu;
//   * by g++ (package kernels/emu) after emu/cuda_emu.h, which maps CUDA's
//     built-ins onto C++20 threads so CI checks every kernel against the CPU
//     device without a GPU.
// So the sources use only what both understand: no warp shuffles, no
// dynamic shared memory, no cuda_*.h headers, no library calls beyond the
// math functions cuda_emu.h provides.
//
// Determinism: no kernel sums floats with atomics. Reductions run over fixed
// chunks in a fixed tree order (one block per chunk, then a second kernel
// that adds the chunk partials in chunk order), so results never depend on
// scheduling. Integer counters (SegCounts) and the "first bad label" minimum
// use atomics: integer addition and min are order-independent.
//
// Sizes are int, and kernels.Ops checks that every element count (and so
// every flat index) of a launch fits in int: kernels may divide in 32 bits
// (several times cheaper than 64-bit division on GPUs). Grid-stride loop
// counters are long long so that i + stride cannot overflow.
#ifndef VOXTRAIN_KERNELS_COMMON_CUH
#define VOXTRAIN_KERNELS_COMMON_CUH

// VT_KERNEL declares a kernel entry point. Under nvcc it has C linkage so
// the PTX entry is named exactly as the function (package gpu looks it up by
// name); in the emulation each .cu file is included inside its own C++
// namespace, so entries keep C++ linkage and cannot collide with anything
// else linked into a Go test binary.
#if defined(__CUDACC__)
#define VT_KERNEL extern "C" __global__ void
#else
#define VT_KERNEL __global__ void
#endif

// VT_BLOCK is the number of threads per block every voxtrain kernel is
// launched with (1-D blocks). Kernels with shared-memory reductions size
// their shared arrays with it and are only correct for this block size.
#define VT_BLOCK 256

// VT_NO_BAD_LABEL is the initial value of a "first bad label" cell: the
// kernels that check labels lower it with atomicMin to the smallest flat
// voxel index whose label is not a class index.
#define VT_NO_BAD_LABEL 0x7fffffff

// vt_class returns the class index of label value l, or -1 when l is not an
// integer in [0, c) (NaN included). Matches cpu.classOf.
__device__ __forceinline__ int vt_class(float l, int c)
{
    if (!(l >= 0.0f && l < (float)c)) {
        return -1;
    }
    int k = (int)l;
    if ((float)k != l) {
        return -1;
    }
    return k;
}

// vt_act applies the activation max(z, slope·z) (0 <= slope <= 1) as
// package cpu does: z times 1 or slope, chosen by z's sign bit (so -0 and
// negative NaNs take the slope).
__device__ __forceinline__ float vt_act(float z, float slope)
{
    return z * ((__float_as_uint(z) >> 31) != 0u ? slope : 1.0f);
}

// vt_act_grad returns dy times the activation's derivative at a point whose
// sign bit is that of s (the pre-activation, or the output, which has the
// same sign).
__device__ __forceinline__ float vt_act_grad(float dy, float s, float slope)
{
    return dy * ((__float_as_uint(s) >> 31) != 0u ? slope : 1.0f);
}

// vt_pow2ceil returns the smallest power of two >= x (x >= 1).
__device__ __forceinline__ int vt_pow2ceil(int x)
{
    int p = 1;
    while (p < x) {
        p <<= 1;
    }
    return p;
}

// vt_f4 is four floats moved as one 16-byte load or store: CUDA's float4
// under nvcc; a 16-byte-aligned struct that may alias float in the
// emulation. Only for addresses that are multiples of 16 bytes.
#if defined(__CUDACC__)
typedef float4 vt_f4;
#else
struct __attribute__((may_alias, aligned(16))) vt_f4 {
    float x, y, z, w;
};
#endif

// vt_bf16 rounds x to bfloat16 (the upper 16 bits of its float32 pattern):
// to nearest, ties to even; infinities stay infinite, values beyond bf16's
// range round to infinity, NaNs stay NaN (quieted, sign and upper payload
// kept).
__device__ __forceinline__ unsigned short vt_bf16(float x)
{
    const unsigned int u = __float_as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (unsigned short)((u >> 16) | 0x0040u);
    }
    return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// vt_ld returns element i of a float32 or bfloat16 array as a float: a
// bf16 value is widened exactly (its bits become the float's upper half).
// With vt_st, it lets one kernel body serve float32 and bf16 storage
// (templates over the element type, instantiated by extern "C" entry
// points per type), with the same float32 arithmetic in between.
__device__ __forceinline__ float vt_ld(const float* p, long long i)
{
    return p[i];
}

__device__ __forceinline__ float vt_ld(const unsigned short* p, long long i)
{
    return __uint_as_float((unsigned int)p[i] << 16);
}

// vt_st stores v as element i of a float32 array, or rounded to bfloat16
// (vt_bf16) into a bf16 array.
__device__ __forceinline__ void vt_st(float* p, long long i, float v)
{
    p[i] = v;
}

__device__ __forceinline__ void vt_st(unsigned short* p, long long i, float v)
{
    p[i] = vt_bf16(v);
}

// vt_h4 is four bfloat16s (unsigned shorts) moved as one 8-byte store:
// CUDA's ushort4 under nvcc, an 8-byte-aligned struct that may alias
// unsigned short in the emulation. Only for addresses that are multiples
// of 8 bytes.
#if defined(__CUDACC__)
typedef ushort4 vt_h4;
#else
struct __attribute__((may_alias, aligned(8))) vt_h4 {
    unsigned short x, y, z, w;
};
#endif

// vt_u4 is sixteen bytes moved as one load or store (eight bfloat16s):
// CUDA's uint4 under nvcc, a 16-byte-aligned struct that may alias any
// type in the emulation. Only for addresses that are multiples of 16 bytes.
#if defined(__CUDACC__)
typedef uint4 vt_u4;
#else
struct __attribute__((may_alias, aligned(16))) vt_u4 {
    unsigned int x, y, z, w;
};
#endif

// vt_aligned8 reports whether p may be written as vt_h4.
__device__ __forceinline__ bool vt_aligned8(const void* p)
{
    return ((unsigned long long)p & 7ull) == 0;
}

// vt_aligned16 reports whether p may be read and written as vt_f4.
__device__ __forceinline__ bool vt_aligned16(const void* p)
{
    return ((unsigned long long)p & 15ull) == 0;
}

// VT_VEC is the elements a vectorised memory-bound kernel moves per
// thread and access: eight, one 16-byte access of bfloat16s (two of
// float32s). Its paths need the channel count to be a multiple of VT_VEC
// and the tensors 16-byte aligned (vt_aligned16), as device allocations
// are; other tensors take the kernels' element-wise path, which computes
// the same values.
#define VT_VEC 8

// vt_ld8 loads elements i .. i+7 of a float32 or bfloat16 array (i a
// multiple of 8, the array 16-byte aligned) as floats, a bf16 value
// widened exactly as vt_ld widens it.
__device__ __forceinline__ void vt_ld8(const float* p, long long i, float v[VT_VEC])
{
    const vt_f4 a = *(const vt_f4*)(p + i);
    const vt_f4 b = *(const vt_f4*)(p + i + 4);
    v[0] = a.x;
    v[1] = a.y;
    v[2] = a.z;
    v[3] = a.w;
    v[4] = b.x;
    v[5] = b.y;
    v[6] = b.z;
    v[7] = b.w;
}

__device__ __forceinline__ void vt_ld8(const unsigned short* p, long long i, float v[VT_VEC])
{
    // Little-endian: element 2k is the low half of word k.
    const vt_u4 u = *(const vt_u4*)(p + i);
    const unsigned int w[4] = {u.x, u.y, u.z, u.w};
    for (int k = 0; k < 4; k++) {
        v[2 * k] = __uint_as_float(w[k] << 16);
        v[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
    }
}

// vt_st8 stores v as elements i .. i+7 (as vt_ld8 requires), rounded to
// bfloat16 as vt_st rounds into a bf16 array.
__device__ __forceinline__ void vt_st8(float* p, long long i, const float v[VT_VEC])
{
    *(vt_f4*)(p + i) = vt_f4{v[0], v[1], v[2], v[3]};
    *(vt_f4*)(p + i + 4) = vt_f4{v[4], v[5], v[6], v[7]};
}

__device__ __forceinline__ void vt_st8(unsigned short* p, long long i, const float v[VT_VEC])
{
    unsigned int w[4];
    for (int k = 0; k < 4; k++) {
        w[k] = (unsigned int)vt_bf16(v[2 * k]) | ((unsigned int)vt_bf16(v[2 * k + 1]) << 16);
    }
    *(vt_u4*)(p + i) = vt_u4{w[0], w[1], w[2], w[3]};
}

// vt_cp8 copies elements 0 .. 7 of src to dst (both 16-byte aligned),
// the bits unchanged.
__device__ __forceinline__ void vt_cp8(float* dst, const float* src)
{
    *(vt_f4*)dst = *(const vt_f4*)src;
    *(vt_f4*)(dst + 4) = *(const vt_f4*)(src + 4);
}

__device__ __forceinline__ void vt_cp8(unsigned short* dst, const unsigned short* src)
{
    *(vt_u4*)dst = *(const vt_u4*)src;
}

// vt_gid and vt_gstride give a 1-D grid-stride loop over long long indices:
// for (long long i = vt_gid(); i < n; i += vt_gstride()).
__device__ __forceinline__ long long vt_gid()
{
    return (long long)blockIdx.x * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ long long vt_gstride()
{
    return (long long)blockDim.x * gridDim.x;
}

// vt_block_sum returns, in every thread, the sum of x over the block, added
// in a fixed binary-tree order. All threads of the block must call it.
__device__ inline double vt_block_sum(double x)
{
    __shared__ double red[VT_BLOCK];
    const int t = threadIdx.x;
    red[t] = x;
    __syncthreads();
    for (int s = VT_BLOCK / 2; s > 0; s >>= 1) {
        if (t < s) {
            red[t] += red[t + s];
        }
        __syncthreads();
    }
    double r = red[0];
    __syncthreads(); // red is reused by the next call
    return r;
}

// vt_list_chunk returns the tensor of chunk q of a tensor list (optim.cu's
// layout: chunks[2q] its tensor, chunks[2q+1] its first element) and sets
// [*lo, *hi) to the chunk's elements (chunk of them, fewer at the tensor's
// end).
__device__ inline int vt_list_chunk(const int* sizes, const int* chunks, int q, int chunk, long long* lo, long long* hi)
{
    const int t = chunks[2 * q];
    *lo = chunks[2 * q + 1];
    *hi = *lo + chunk < sizes[t] ? *lo + chunk : sizes[t];
    return t;
}

// vt_block_chunk_sum returns, in every thread of the block, the sum of
// the n doubles p[0], p[stride], ..., p[(n-1)*stride]: thread t adds
// elements t, t + VT_BLOCK, ... in order, then vt_block_sum folds the
// threads' sums in its fixed tree. The second pass of a chunked reduction:
// one block per output, so that the hundreds of chunk partials of a large
// volume are added by 256 threads at once, not one after the other. All
// threads of the block must call it.
__device__ inline double vt_block_chunk_sum(const double* p, long long stride, int n)
{
    double s = 0.0;
    for (int k = threadIdx.x; k < n; k += VT_BLOCK) {
        s += p[(long long)k * stride];
    }
    return vt_block_sum(s);
}

// vt_chunk_channel_sums computes, for one block, NV sums per channel over
// the voxels [lo, hi) of a channels-last tensor with C channels:
//
//   out[q*C + c] = Σ_{v in [lo,hi)} f_q(v, c)     (q < NV, c < C)
//
// f(v, c, acc) adds f_q(v, c) to acc[q] for q < NV. Channels are processed
// in groups of cp = min(C, VT_BLOCK): thread t handles channel c0 + t%cp of
// voxel rows t/cp, t/cp + rows, ... (rows = VT_BLOCK/cp), so neighbouring
// threads read neighbouring channels of one voxel (coalesced). The rows'
// double sums are then folded in a fixed tree. All threads of the block
// must call it; thread r = 0 of each channel writes out.
template <int NV, typename F>
__device__ void vt_chunk_channel_sums(long long lo, long long hi, int C, F f, double* out)
{
    __shared__ double red[NV][VT_BLOCK];
    const int t = threadIdx.x;
    const int cp = C < VT_BLOCK ? C : VT_BLOCK;
    const int rows = VT_BLOCK / cp;
    const int r = t / cp;
    const int cl = t % cp;
    const int top = vt_pow2ceil(rows);
    for (int c0 = 0; c0 < C; c0 += cp) {
        const int c = c0 + cl;
        const bool mine = r < rows && c < C;
        double acc[NV];
        for (int q = 0; q < NV; q++) {
            acc[q] = 0.0;
        }
        if (mine) {
            for (long long v = lo + r; v < hi; v += rows) {
                f(v, c, acc);
            }
        }
        for (int q = 0; q < NV; q++) {
            red[q][t] = acc[q];
        }
        __syncthreads();
        for (int s = top >> 1; s > 0; s >>= 1) {
            if (mine && r < s && r + s < rows) {
                for (int q = 0; q < NV; q++) {
                    red[q][t] += red[q][t + s * cp];
                }
            }
            __syncthreads();
        }
        if (mine && r == 0) {
            for (int q = 0; q < NV; q++) {
                out[q * C + c] = red[q][t];
            }
        }
        __syncthreads(); // red is reused by the next channel group
    }
}

// vt_chunk_channel_sums_v is vt_chunk_channel_sums over groups of VT_VEC
// channels: thread t handles the channels 8g .. 8g+7 of group g = g0 +
// t%gp (gp = min(C/8, VT_BLOCK) groups at a time) of voxel rows t/gp,
// t/gp + rows, ... (rows = VT_BLOCK/gp), so that one thread reads 16
// bytes of bf16s (or 32 of float32s) per voxel and neighbouring threads
// neighbouring groups. f(v, c0, acc) adds f_q(v, c0 + k) to acc[k*NV + q]
// for k < VT_VEC, q < NV; the rows' double sums are then folded in a
// fixed tree, all of a thread's at once. C must be a multiple of VT_VEC.
// The order of the sums differs from vt_chunk_channel_sums' (fixed all
// the same: results never depend on scheduling). All threads of the block
// must call it; thread r = 0 of each group writes out.
template <int NV, typename F>
__device__ void vt_chunk_channel_sums_v(long long lo, long long hi, int C, F f, double* out)
{
    __shared__ double red[NV * VT_VEC][VT_BLOCK];
    const int t = threadIdx.x;
    const int groups = C / VT_VEC;
    const int gp = groups < VT_BLOCK ? groups : VT_BLOCK;
    const int rows = VT_BLOCK / gp;
    const int r = t / gp;
    const int gl = t % gp;
    const int top = vt_pow2ceil(rows);
    for (int g0 = 0; g0 < groups; g0 += gp) {
        const int g = g0 + gl;
        const bool mine = r < rows && g < groups;
        double acc[NV * VT_VEC];
        for (int q = 0; q < NV * VT_VEC; q++) {
            acc[q] = 0.0;
        }
        if (mine) {
            for (long long v = lo + r; v < hi; v += rows) {
                f(v, g * VT_VEC, acc);
            }
        }
        for (int q = 0; q < NV * VT_VEC; q++) {
            red[q][t] = acc[q];
        }
        __syncthreads();
        for (int s = top >> 1; s > 0; s >>= 1) {
            if (mine && r < s && r + s < rows) {
                for (int q = 0; q < NV * VT_VEC; q++) {
                    red[q][t] += red[q][t + s * gp];
                }
            }
            __syncthreads();
        }
        if (mine && r == 0) {
            for (int k = 0; k < VT_VEC; k++) {
                for (int q = 0; q < NV; q++) {
                    out[q * C + g * VT_VEC + k] = red[k * NV + q][t];
                }
            }
        }
        __syncthreads(); // red is reused by the next group of groups
    }
}

#endif // VOXTRAIN_KERNELS_COMMON_CUH
