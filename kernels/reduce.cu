// reduce.cu — deterministic reductions: per-(sample, channel) sums over the
// voxels of a channels-last tensor (bias gradient = ChannelSum, ChannelDot
// for the losses), the sum of squares for gradient-norm clipping, and the
// second pass that adds chunk partials in chunk order.
//
// A reduction is two launches. Pass 1 gives each block a fixed chunk of
// voxels (or elements) and writes one double partial per chunk and output;
// pass 2 (reduce_chunks_*) has one block per output add its chunk partials
// in a fixed order (vt_block_chunk_sum). Chunk sizes are chosen by package kernels from the
// geometry only, so the result is the same on every run and GPU.
#include "common.cuh"

// channel_sum_partial: for sample n = blockIdx.y and chunk k = blockIdx.x
// (voxels [k*chunk, min(v, (k+1)*chunk)) of that sample),
//
//   part[(n*gridDim.x + k)*c + j] = Σ_v a[n][v][j]·b[n][v][j]   (double)
//
// with b == null meaning plain sums. Launch: grid (ceil(v/chunk), nb),
// block VT_BLOCK, static shared memory 20 KiB (the VT_VEC path's 16).
template <typename T>
__device__ __forceinline__ void channel_sum_partial_t(const T* a, const T* b, double* part, int v, int c, int chunk)
{
    const long long n = blockIdx.y;
    const long long lo = (long long)blockIdx.x * chunk;
    const long long hi = lo + chunk < v ? lo + chunk : v;
    const T* an = a + n * v * c;
    const T* bn = b != nullptr ? b + n * v * c : nullptr;
    double* out = part + (n * gridDim.x + blockIdx.x) * c;
    if (c % VT_VEC == 0 && vt_aligned16(a) && (b == nullptr || vt_aligned16(b))) {
        // VT_VEC channels per thread and voxel (see vt_chunk_channel_sums_v).
        // One lambda (its branch is the same in every thread): each
        // instantiation has its own 16 KiB of shared memory.
        vt_chunk_channel_sums_v<1>(lo, hi, c, [=](long long vox, int j0, double* acc) {
            float e[VT_VEC], f[VT_VEC];
            vt_ld8(an, vox * c + j0, e);
            if (bn == nullptr) {
                for (int k = 0; k < VT_VEC; k++) {
                    acc[k] += (double)e[k];
                }
                return;
            }
            vt_ld8(bn, vox * c + j0, f);
            for (int k = 0; k < VT_VEC; k++) {
                acc[k] += (double)e[k] * (double)f[k];
            }
        }, out);
        return;
    }
    if (bn == nullptr) {
        vt_chunk_channel_sums<1>(lo, hi, c, [=](long long vox, int j, double* acc) {
            acc[0] += (double)vt_ld(an, vox * c + j);
        }, out);
    } else {
        vt_chunk_channel_sums<1>(lo, hi, c, [=](long long vox, int j, double* acc) {
            acc[0] += (double)vt_ld(an, vox * c + j) * (double)vt_ld(bn, vox * c + j);
        }, out);
    }
}

VT_KERNEL channel_sum_partial(const float* a, const float* b, double* part, int v, int c, int chunk)
{
    channel_sum_partial_t(a, b, part, v, c, chunk);
}

// channel_sum_partial_bf16: channel_sum_partial for bf16 a and b (a bf16
// activation gradient's channel sums: a bias gradient), each value widened
// exactly, so the sums are the float32 kernel's on the widened values.
VT_KERNEL channel_sum_partial_bf16(const unsigned short* a, const unsigned short* b, double* part, int v, int c,
                                   int chunk)
{
    channel_sum_partial_t(a, b, part, v, c, chunk);
}

// vt_sumsq_range returns, in every thread, Σ x[i]² (double) over [lo, hi),
// thread t adding elements lo + t, lo + t + VT_BLOCK, ... in order, folded
// by vt_block_sum: one chunk of the flat sums of squares, shared by the
// one-tensor and the tensor-list kernels so that their chunks agree bit
// for bit. All threads of the block must call it.
__device__ inline double vt_sumsq_range(const float* x, long long lo, long long hi)
{
    double s = 0.0;
    for (long long i = lo + threadIdx.x; i < hi; i += VT_BLOCK) {
        const double f = (double)x[i];
        s += f * f;
    }
    return vt_block_sum(s);
}

// sumsq_partial: part[k] = Σ x[i]² (double) over the elements
// [k*chunk, min(n, (k+1)*chunk)), k = blockIdx.x. Launch: grid
// ceil(n/chunk), block VT_BLOCK, static shared memory 2 KiB.
VT_KERNEL sumsq_partial(const float* x, double* part, int n, int chunk)
{
    const long long lo = (long long)blockIdx.x * chunk;
    const long long hi = lo + chunk < n ? lo + chunk : n;
    const double s = vt_sumsq_range(x, lo, hi);
    if (threadIdx.x == 0) {
        part[blockIdx.x] = s;
    }
}

// sumsq_partial_list: sumsq_partial over a tensor list (optim.cu's layout,
// one operand per tensor): part[q] = Σ x² over chunk q's elements, chunk q
// of tensor chunks[2q] starting at element chunks[2q+1]. With the chunk
// sumsq_partial takes, each chunk's partial is bit-identical to its own.
// Launch: min(nchunks, MaxGrid) blocks striding over the chunks; static
// shared memory 2 KiB.
VT_KERNEL sumsq_partial_list(const unsigned long long* ptrs, const int* sizes, const int* chunks, double* part,
                             int nchunks, int chunk)
{
    for (int q = blockIdx.x; q < nchunks; q += gridDim.x) {
        long long lo, hi;
        const int t = vt_list_chunk(sizes, chunks, q, chunk, &lo, &hi);
        const double s = vt_sumsq_range((const float*)ptrs[t], lo, hi);
        if (threadIdx.x == 0) {
            part[q] = s;
        }
    }
}

// reduce_ranges_f64: out[t] = Σ part[k] over k in [first[t], first[t+1]),
// added in vt_block_chunk_sum's fixed order (as reduce_chunks_f64 adds one
// output's chunks). Launch: one block per output, min(n, MaxGrid) blocks
// striding over the outputs; static shared memory 2 KiB.
VT_KERNEL reduce_ranges_f64(const double* part, const int* first, double* out, int n)
{
    for (int t = blockIdx.x; t < n; t += gridDim.x) {
        const double s = vt_block_chunk_sum(part + first[t], 1, first[t + 1] - first[t]);
        if (threadIdx.x == 0) {
            out[t] = s;
        }
    }
}

// reduce_chunks_f64: out[r*w + j] = Σ_{k < nchunks} part[(r*nchunks + k)*w + j]
// for r < rows, j < w, each sum added in vt_block_chunk_sum's fixed order.
// Launch: one block per output, min(rows*w, MaxGrid) blocks striding over
// the outputs; static shared memory 2 KiB.
VT_KERNEL reduce_chunks_f64(const double* part, double* out, int rows, int nchunks, int w)
{
    const long long total = (long long)rows * w;
    for (long long i = blockIdx.x; i < total; i += gridDim.x) {
        const long long r = i / w;
        const long long j = i % w;
        const double s = vt_block_chunk_sum(part + r * nchunks * w + j, w, nchunks);
        if (threadIdx.x == 0) {
            out[i] = s;
        }
    }
}

// reduce_chunks_f32: as reduce_chunks_f64, rounding the sums to float.
VT_KERNEL reduce_chunks_f32(const double* part, float* out, int rows, int nchunks, int w)
{
    const long long total = (long long)rows * w;
    for (long long i = blockIdx.x; i < total; i += gridDim.x) {
        const long long r = i / w;
        const long long j = i % w;
        const double s = vt_block_chunk_sum(part + r * nchunks * w + j, w, nchunks);
        if (threadIdx.x == 0) {
            out[i] = (float)s;
        }
    }
}
