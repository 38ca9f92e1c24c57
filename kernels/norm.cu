// norm.cu — instance normalisation fused with the LeakyReLU that follows it
// (nn.Device.InstanceNormActForward / InstanceNormActBackward), for
// channels-last x (N, V voxels, C), affine gamma/beta (C), and stats
// (N, C, 2) = (mean, 1/sqrt(var + eps)) with the biased variance.
//
// Forward, three launches:
//   instnorm_fwd_partial   per (sample, chunk): Σx, Σx² per channel (double)
//   instnorm_fwd_stats     per (sample, channel): add the chunks (a block each),
//                          mean and rstd as package cpu computes them
//   instnorm_fwd_apply     y = act((x - mean)·(rstd·gamma) + beta)
// Backward, with z recomputed from x (the forward's output is not needed),
// g = dy·act'(z) and x̂ = (x - mean)·rstd, four launches:
//   instnorm_bwd_partial   per (sample, chunk): Σg, Σg·x per channel
//   instnorm_bwd_finish    per (sample, channel): add the chunks (a block each),
//                          Σg·x̂ = rstd·(Σg·x - mean·Σg), dx's coefficients
//   instnorm_bwd_affine    dbeta = Σ_n Σg, dgamma = Σ_n Σg·x̂ (samples in order)
//   instnorm_bwd_apply     dx = gamma·rstd·(g - mean(g) - x̂·mean(g·x̂))
//
// With c a multiple of VT_VEC and 16-byte aligned tensors (device
// allocations are), every kernel that reads an activation moves 8
// channels of a voxel per thread and access (16-byte bf16 loads and
// stores) and divides its index once per 8 elements: these passes are
// memory-bound, and the element-wise path spends more instructions on
// index arithmetic and 2-byte accesses than the memory takes. The
// partial sums then run in vt_chunk_channel_sums_v's order (fixed, like
// the element-wise path's); the elementwise passes compute the same bits.
//
// Sums are double, added in a fixed order (see common.cuh), so the
// statistics match the CPU device's to double rounding and the elementwise
// passes repeat its float32 arithmetic exactly.
//
// bf16 activation storage: the kernels that read x (and write y) have a
// _bf16 twin for x (and y) stored as bfloat16 (unsigned short), dy, dx,
// stats and the parameters staying float32. Both are instantiations of one
// template over x's element type (vt_ld widens a bf16 value exactly, vt_st
// rounds y to nearest even), so a _bf16 kernel computes exactly what the
// float32 kernel computes on the widened values, with y rounded once: the
// result of widening x into float32, running the float32 kernels and
// rounding y, without the float32 copies. The _bf16g twins of the
// backward take bf16 activation gradients too (dy read, dx written as
// bf16; dgamma, dbeta float32): the float32 kernels' result on the widened
// x and dy, dx rounded once. The stats, finish and affine kernels read no
// activation and serve all.
#include "common.cuh"

// instnorm_fwd_partial: part[(n*gridDim.x + k)*2c + j] = Σx and
// part[... + c + j] = Σx² over the voxels of chunk k of sample n. Launch:
// grid (ceil(v/chunk), nb), block VT_BLOCK, static shared memory 36 KiB
// (the VT_VEC path's 32).
template <typename T>
__device__ __forceinline__ void instnorm_fwd_partial_t(const T* x, double* part, int v, int c, int chunk)
{
    const long long n = blockIdx.y;
    const long long lo = (long long)blockIdx.x * chunk;
    const long long hi = lo + chunk < v ? lo + chunk : v;
    const T* xn = x + n * v * c;
    double* out = part + (n * gridDim.x + blockIdx.x) * 2 * c;
    if (c % VT_VEC == 0 && vt_aligned16(x)) {
        vt_chunk_channel_sums_v<2>(lo, hi, c, [=](long long vox, int j0, double* acc) {
            float xv[VT_VEC];
            vt_ld8(xn, vox * c + j0, xv);
            for (int k = 0; k < VT_VEC; k++) {
                const double f = (double)xv[k];
                acc[2 * k] += f;
                acc[2 * k + 1] += f * f;
            }
        }, out);
        return;
    }
    vt_chunk_channel_sums<2>(lo, hi, c, [=](long long vox, int j, double* acc) {
        const double f = (double)vt_ld(xn, vox * c + j);
        acc[0] += f;
        acc[1] += f * f;
    }, out);
}

VT_KERNEL instnorm_fwd_partial(const float* x, double* part, int v, int c, int chunk)
{
    instnorm_fwd_partial_t(x, part, v, c, chunk);
}

// instnorm_fwd_partial_bf16: instnorm_fwd_partial for a bf16 x.
VT_KERNEL instnorm_fwd_partial_bf16(const unsigned short* x, double* part, int v, int c, int chunk)
{
    instnorm_fwd_partial_t(x, part, v, c, chunk);
}

// instnorm_fwd_stats: for each (n, j), adds the nchunks partials
// (vt_block_chunk_sum) and writes stats[(n*c + j)*2] = mean, [.. + 1] =
// 1/sqrt(max(E[x²] - mean², 0) + eps). Launch: one block per (n, j),
// min(nb*c, MaxGrid) blocks striding over them; static shared memory 2 KiB.
VT_KERNEL instnorm_fwd_stats(const double* part, float* stats, int nb, int v, int c, int nchunks, float eps)
{
    const long long total = (long long)nb * c;
    for (long long i = blockIdx.x; i < total; i += gridDim.x) {
        const long long n = i / c;
        const long long j = i % c;
        const double* p = part + n * nchunks * 2 * c;
        const double s = vt_block_chunk_sum(p + j, 2 * c, nchunks);
        const double q = vt_block_chunk_sum(p + c + j, 2 * c, nchunks);
        if (threadIdx.x != 0) {
            continue;
        }
        const double mean = s / (double)v;
        double var = q / (double)v - mean * mean;
        if (var < 0.0) {
            var = 0.0;
        }
        stats[i * 2] = (float)mean;
        stats[i * 2 + 1] = (float)(1.0 / sqrt(var + (double)eps));
    }
}

// instnorm_fwd_apply: y = act(z) (vt_act) with
// z = (x - mean)·(rstd·gamma) + beta. y may alias x. Launch: 1-D,
// grid-stride, work nb*v*c.
template <typename T>
__device__ __forceinline__ void instnorm_fwd_apply_t(const T* x, const float* gamma, const float* beta,
                                                     const float* stats, T* y, int nb, int v, int c, float slope)
{
    const long long total = (long long)nb * v * c;
    const int per = v * c;
    if (c % VT_VEC == 0 && vt_aligned16(x) && vt_aligned16(y)) {
        // VT_VEC channels of one voxel per thread and step: one 16-byte
        // load and store of bf16s, one index division per 8 elements.
        for (long long i8 = vt_gid(); i8 < total / VT_VEC; i8 += vt_gstride()) {
            const int i = (int)i8 * VT_VEC;
            const int j0 = i % c;
            const int s0 = (i / per) * c + j0;
            float e[VT_VEC];
            vt_ld8(x, i, e);
            for (int k = 0; k < VT_VEC; k++) {
                const float mean = stats[(s0 + k) * 2];
                const float scale = stats[(s0 + k) * 2 + 1] * gamma[j0 + k];
                e[k] = vt_act((e[k] - mean) * scale + beta[j0 + k], slope);
            }
            vt_st8(y, i, e);
        }
        return;
    }
    for (long long i = vt_gid(); i < total; i += vt_gstride()) {
        const int j = (int)i % c;
        const int s = (((int)i / per) * c + j) * 2;
        const float mean = stats[s];
        const float scale = stats[s + 1] * gamma[j];
        vt_st(y, i, vt_act((vt_ld(x, i) - mean) * scale + beta[j], slope));
    }
}

VT_KERNEL instnorm_fwd_apply(const float* x, const float* gamma, const float* beta, const float* stats, float* y,
                             int nb, int v, int c, float slope)
{
    instnorm_fwd_apply_t(x, gamma, beta, stats, y, nb, v, c, slope);
}

// instnorm_fwd_apply_bf16: instnorm_fwd_apply for bf16 x and y (y rounded
// to nearest even; y may alias x).
VT_KERNEL instnorm_fwd_apply_bf16(const unsigned short* x, const float* gamma, const float* beta,
                                  const float* stats, unsigned short* y, int nb, int v, int c, float slope)
{
    instnorm_fwd_apply_t(x, gamma, beta, stats, y, nb, v, c, slope);
}

// instnorm_bwd_partial: part[(n*gridDim.x + k)*2c + j] = Σg and
// part[... + c + j] = Σg·x over the voxels of chunk k of sample n, with
// g = dy·act'(z) and z = (x - mean)·(rstd·gamma) + beta recomputed as the
// forward computed it. Launch: grid (ceil(v/chunk), nb), block VT_BLOCK,
// static shared memory 36 KiB (the VT_VEC path's 32).
template <typename T, typename G>
__device__ __forceinline__ void instnorm_bwd_partial_t(const T* x, const float* gamma, const float* beta,
                                                       const G* dy, const float* stats, double* part, int v,
                                                       int c, int chunk, float slope)
{
    const long long n = blockIdx.y;
    const long long lo = (long long)blockIdx.x * chunk;
    const long long hi = lo + chunk < v ? lo + chunk : v;
    const long long off = n * v * c;
    const float* st = stats + n * c * 2;
    double* out = part + (n * gridDim.x + blockIdx.x) * 2 * c;
    if (c % VT_VEC == 0 && vt_aligned16(x) && vt_aligned16(dy)) {
        vt_chunk_channel_sums_v<2>(lo, hi, c, [=](long long vox, int j0, double* acc) {
            const long long i = off + vox * c + j0;
            float xv[VT_VEC], dv[VT_VEC];
            vt_ld8(x, i, xv);
            vt_ld8(dy, i, dv);
            for (int k = 0; k < VT_VEC; k++) {
                const int j = j0 + k;
                const float z = (xv[k] - st[2 * j]) * (st[2 * j + 1] * gamma[j]) + beta[j];
                const double g = (double)vt_act_grad(dv[k], z, slope);
                acc[2 * k] += g;
                acc[2 * k + 1] += g * (double)xv[k];
            }
        }, out);
        return;
    }
    vt_chunk_channel_sums<2>(lo, hi, c, [=](long long vox, int j, double* acc) {
        const long long i = off + vox * c + j;
        const float xi = vt_ld(x, i);
        const float z = (xi - st[2 * j]) * (st[2 * j + 1] * gamma[j]) + beta[j];
        const double g = (double)vt_act_grad(vt_ld(dy, i), z, slope);
        acc[0] += g;
        acc[1] += g * (double)xi;
    }, out);
}

VT_KERNEL instnorm_bwd_partial(const float* x, const float* gamma, const float* beta, const float* dy,
                               const float* stats, double* part, int v, int c, int chunk, float slope)
{
    instnorm_bwd_partial_t(x, gamma, beta, dy, stats, part, v, c, chunk, slope);
}

// instnorm_bwd_partial_bf16: instnorm_bwd_partial for a bf16 x.
VT_KERNEL instnorm_bwd_partial_bf16(const unsigned short* x, const float* gamma, const float* beta,
                                    const float* dy, const float* stats, double* part, int v, int c, int chunk,
                                    float slope)
{
    instnorm_bwd_partial_t(x, gamma, beta, dy, stats, part, v, c, chunk, slope);
}

// instnorm_bwd_partial_bf16g: instnorm_bwd_partial for bf16 x and dy.
VT_KERNEL instnorm_bwd_partial_bf16g(const unsigned short* x, const float* gamma, const float* beta,
                                     const unsigned short* dy, const float* stats, double* part, int v, int c,
                                     int chunk, float slope)
{
    instnorm_bwd_partial_t(x, gamma, beta, dy, stats, part, v, c, chunk, slope);
}

// instnorm_bwd_finish: for each (n, j), adds the nchunks partials
// and writes
//   tot[n*2c + j]      = Σg
//   tot[n*2c + c + j]  = Σg·x̂ = rstd·(Σg·x - mean·Σg)
//   coef[(n*c + j)*3]  = A = gamma·rstd, B = -A·rstd·Σg·x̂/v, C = -A·Σg/v
// (float), so that dx = A·g + B·(x - mean) + C, the partials added by
// vt_block_chunk_sum. Launch: one block per (n, j), min(nb*c, MaxGrid)
// blocks striding over them; static shared memory 2 KiB.
VT_KERNEL instnorm_bwd_finish(const double* part, const float* stats, const float* gamma, double* tot, float* coef,
                              int nb, int v, int c, int nchunks)
{
    const long long total = (long long)nb * c;
    for (long long i = blockIdx.x; i < total; i += gridDim.x) {
        const long long n = i / c;
        const long long j = i % c;
        const double* p = part + n * nchunks * 2 * c;
        const double sg = vt_block_chunk_sum(p + j, 2 * c, nchunks);
        const double sgx = vt_block_chunk_sum(p + c + j, 2 * c, nchunks);
        if (threadIdx.x != 0) {
            continue;
        }
        const double mean = (double)stats[i * 2];
        const double rstd = (double)stats[i * 2 + 1];
        const double gxh = rstd * (sgx - mean * sg);
        tot[n * 2 * c + j] = sg;
        tot[n * 2 * c + c + j] = gxh;
        const double a = (double)gamma[j] * rstd;
        coef[i * 3] = (float)a;
        coef[i * 3 + 1] = (float)(-a * rstd * gxh / (double)v);
        coef[i * 3 + 2] = (float)(-a * sg / (double)v);
    }
}

// instnorm_bwd_affine: dbeta[j] = Σ_n tot[n*2c + j], dgamma[j] =
// Σ_n tot[n*2c + c + j], samples added in order. Launch: 1-D, grid-stride,
// work c.
VT_KERNEL instnorm_bwd_affine(const double* tot, float* dgamma, float* dbeta, int nb, int c)
{
    for (long long j = vt_gid(); j < c; j += vt_gstride()) {
        double g = 0.0, gx = 0.0;
        for (long long n = 0; n < nb; n++) {
            g += tot[n * 2 * c + j];
            gx += tot[n * 2 * c + c + j];
        }
        dbeta[j] = (float)g;
        dgamma[j] = (float)gx;
    }
}

// instnorm_bwd_apply: dx = (A·g + B·(x - mean)) + C with instnorm_bwd_finish's
// coefficients and g = dy·act'(z), z recomputed as in instnorm_bwd_partial.
// dx may alias dy. Launch: 1-D, grid-stride, work nb*v*c.
template <typename T, typename G>
__device__ __forceinline__ void instnorm_bwd_apply_t(const T* x, const float* gamma, const float* beta,
                                                     const G* dy, const float* stats, const float* coef,
                                                     G* dx, int nb, int v, int c, float slope)
{
    const long long total = (long long)nb * v * c;
    const int per = v * c;
    if (c % VT_VEC == 0 && vt_aligned16(x) && vt_aligned16(dy) && vt_aligned16(dx)) {
        for (long long i8 = vt_gid(); i8 < total / VT_VEC; i8 += vt_gstride()) {
            const int i = (int)i8 * VT_VEC;
            const int j0 = i % c;
            const int s0 = (i / per) * c + j0;
            float xv[VT_VEC], e[VT_VEC];
            vt_ld8(x, i, xv);
            vt_ld8(dy, i, e);
            for (int k = 0; k < VT_VEC; k++) {
                const int s = s0 + k;
                const float xc = xv[k] - stats[s * 2];
                const float scale = stats[s * 2 + 1] * gamma[j0 + k];
                const float g = vt_act_grad(e[k], xc * scale + beta[j0 + k], slope);
                e[k] = coef[s * 3] * g + coef[s * 3 + 1] * xc + coef[s * 3 + 2];
            }
            vt_st8(dx, i, e);
        }
        return;
    }
    for (long long i = vt_gid(); i < total; i += vt_gstride()) {
        const int j = (int)i % c;
        const int s = ((int)i / per) * c + j;
        const float xc = vt_ld(x, i) - stats[s * 2];
        const float scale = stats[s * 2 + 1] * gamma[j];
        const float g = vt_act_grad(vt_ld(dy, i), xc * scale + beta[j], slope);
        vt_st(dx, i, coef[s * 3] * g + coef[s * 3 + 1] * xc + coef[s * 3 + 2]);
    }
}

VT_KERNEL instnorm_bwd_apply(const float* x, const float* gamma, const float* beta, const float* dy,
                             const float* stats, const float* coef, float* dx, int nb, int v, int c, float slope)
{
    instnorm_bwd_apply_t(x, gamma, beta, dy, stats, coef, dx, nb, v, c, slope);
}

// instnorm_bwd_apply_bf16: instnorm_bwd_apply for a bf16 x (dy, dx float32;
// dx may alias dy).
VT_KERNEL instnorm_bwd_apply_bf16(const unsigned short* x, const float* gamma, const float* beta, const float* dy,
                                  const float* stats, const float* coef, float* dx, int nb, int v, int c,
                                  float slope)
{
    instnorm_bwd_apply_t(x, gamma, beta, dy, stats, coef, dx, nb, v, c, slope);
}

// instnorm_bwd_apply_bf16g: instnorm_bwd_apply for bf16 x, dy and dx (dx
// rounded to bf16; dx may alias dy).
VT_KERNEL instnorm_bwd_apply_bf16g(const unsigned short* x, const float* gamma, const float* beta,
                                   const unsigned short* dy, const float* stats, const float* coef,
                                   unsigned short* dx, int nb, int v, int c, float slope)
{
    instnorm_bwd_apply_t(x, gamma, beta, dy, stats, coef, dx, nb, v, c, slope);
}
