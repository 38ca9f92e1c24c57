// elementwise.cu — elementwise and data-movement kernels: fills, copy, scale, add,
// LeakyReLU/ReLU, channel bias, channel concat/split for skip connections,
// NCDHW <-> NDHWC, per-(sample, channel) affine add, label downsampling and
// one-hot encoding.
//
// Launch (all kernels here): 1-D blocks of VT_BLOCK threads, a 1-D grid of
// any size >= 1 (grid-stride loops; package kernels uses
// min(ceil(work/VT_BLOCK), 8192) blocks where work is the element count
// named per kernel), no dynamic shared memory.
//
// The arithmetic is written as package cpu writes it (same float32
// operations in the same order), so with PTX built with -fmad=false the
// results are bit-identical to the CPU device.
//
// The _bf16 twins (activations, channel bias, concat and split, add) serve
// bf16 activation storage, and the _bf16g one (the activation's backward)
// bf16 activation gradients too: the same template as the float32 kernel,
// instantiated with bf16 (unsigned short) operands, so each computes the
// float32 kernel's result on the widened values and rounds it once to
// nearest even (vt_ld, vt_st) — what widening, the float32 kernel and
// rounding compute, in one pass over memory.
#include "common.cuh"

// fill_f32: x[i] = v for i < n. Work: n.
VT_KERNEL fill_f32(float* x, int n, float v)
{
    for (long long i = vt_gid(); i < n; i += vt_gstride()) {
        x[i] = v;
    }
}

// fill_i32: x[i] = v for i < n (counters, the bad-label cell). Work: n.
VT_KERNEL fill_i32(int* x, int n, int v)
{
    for (long long i = vt_gid(); i < n; i += vt_gstride()) {
        x[i] = v;
    }
}

// scale_f32: x[i] *= alpha. Work: n.
VT_KERNEL scale_f32(float* x, int n, float alpha)
{
    for (long long i = vt_gid(); i < n; i += vt_gstride()) {
        x[i] *= alpha;
    }
}

// copy_f32: dst[i] = src[i] (nn.Device.Copy may equally use
// cuMemcpyDtoDAsync; the recipes use this kernel so they need only launches).
// Work: n.
VT_KERNEL copy_f32(float* dst, const float* src, int n)
{
    for (long long i = vt_gid(); i < n; i += vt_gstride()) {
        dst[i] = src[i];
    }
}

// add_f32: dst[i] += src[i]. Work: n.
template <typename T>
__device__ __forceinline__ void add_t(T* dst, const T* src, int n)
{
    if (n % VT_VEC == 0 && vt_aligned16(dst) && vt_aligned16(src)) {
        for (long long i8 = vt_gid(); i8 < n / VT_VEC; i8 += vt_gstride()) {
            float d[VT_VEC], e[VT_VEC];
            vt_ld8(dst, i8 * VT_VEC, d);
            vt_ld8(src, i8 * VT_VEC, e);
            for (int k = 0; k < VT_VEC; k++) {
                d[k] = d[k] + e[k];
            }
            vt_st8(dst, i8 * VT_VEC, d);
        }
        return;
    }
    for (long long i = vt_gid(); i < n; i += vt_gstride()) {
        vt_st(dst, i, vt_ld(dst, i) + vt_ld(src, i));
    }
}

VT_KERNEL add_f32(float* dst, const float* src, int n)
{
    add_t(dst, src, n);
}

// add_bf16: add_f32 for bf16 dst and src (activation gradients), the sum
// rounded to bf16.
VT_KERNEL add_bf16(unsigned short* dst, const unsigned short* src, int n)
{
    add_t(dst, src, n);
}

// act_forward: y = max(x, slope·x) (LeakyReLU; slope 0 is ReLU), see
// vt_act. y may alias x. Work: n.
template <typename T>
__device__ __forceinline__ void act_forward_t(const T* x, T* y, int n, float slope)
{
    if (n % VT_VEC == 0 && vt_aligned16(x) && vt_aligned16(y)) {
        for (long long i8 = vt_gid(); i8 < n / VT_VEC; i8 += vt_gstride()) {
            float e[VT_VEC];
            vt_ld8(x, i8 * VT_VEC, e);
            for (int k = 0; k < VT_VEC; k++) {
                e[k] = vt_act(e[k], slope);
            }
            vt_st8(y, i8 * VT_VEC, e);
        }
        return;
    }
    for (long long i = vt_gid(); i < n; i += vt_gstride()) {
        vt_st(y, i, vt_act(vt_ld(x, i), slope));
    }
}

VT_KERNEL act_forward(const float* x, float* y, int n, float slope)
{
    act_forward_t(x, y, n, slope);
}

// act_forward_bf16: act_forward for bf16 x and y (y may alias x).
VT_KERNEL act_forward_bf16(const unsigned short* x, unsigned short* y, int n, float slope)
{
    act_forward_t(x, y, n, slope);
}

// act_backward: dx = dy·(1 or slope by the sign bit of the forward's output
// y, which is the input's for 0 <= slope <= 1). dx may alias dy. Work: n.
// T is y's element type, G the gradients'.
template <typename T, typename G>
__device__ __forceinline__ void act_backward_t(const T* y, const G* dy, G* dx, int n, float slope)
{
    if (n % VT_VEC == 0 && vt_aligned16(y) && vt_aligned16(dy) && vt_aligned16(dx)) {
        for (long long i8 = vt_gid(); i8 < n / VT_VEC; i8 += vt_gstride()) {
            float yv[VT_VEC], e[VT_VEC];
            vt_ld8(y, i8 * VT_VEC, yv);
            vt_ld8(dy, i8 * VT_VEC, e);
            for (int k = 0; k < VT_VEC; k++) {
                e[k] = vt_act_grad(e[k], yv[k], slope);
            }
            vt_st8(dx, i8 * VT_VEC, e);
        }
        return;
    }
    for (long long i = vt_gid(); i < n; i += vt_gstride()) {
        vt_st(dx, i, vt_act_grad(vt_ld(dy, i), vt_ld(y, i), slope));
    }
}

VT_KERNEL act_backward(const float* y, const float* dy, float* dx, int n, float slope)
{
    act_backward_t(y, dy, dx, n, slope);
}

// act_backward_bf16: act_backward for a bf16 y (dy, dx float32).
VT_KERNEL act_backward_bf16(const unsigned short* y, const float* dy, float* dx, int n, float slope)
{
    act_backward_t(y, dy, dx, n, slope);
}

// act_backward_bf16g: act_backward for bf16 y, dy and dx (activation
// gradients stored as bf16 too; dx may alias dy), dx rounded to bf16.
VT_KERNEL act_backward_bf16g(const unsigned short* y, const unsigned short* dy, unsigned short* dx, int n,
                             float slope)
{
    act_backward_t(y, dy, dx, n, slope);
}

// add_channel_bias: t[r][c] += bias[c] for a channels-last tensor of rows
// voxels (all samples) and c channels. Work: rows*c.
template <typename T>
__device__ __forceinline__ void add_channel_bias_t(T* t, const float* bias, int rows, int c)
{
    const long long n = (long long)rows * c;
    if (c % VT_VEC == 0 && vt_aligned16(t)) {
        for (long long i8 = vt_gid(); i8 < n / VT_VEC; i8 += vt_gstride()) {
            const int j0 = (int)(i8 * VT_VEC) % c;
            float e[VT_VEC];
            vt_ld8(t, i8 * VT_VEC, e);
            for (int k = 0; k < VT_VEC; k++) {
                e[k] = e[k] + bias[j0 + k];
            }
            vt_st8(t, i8 * VT_VEC, e);
        }
        return;
    }
    for (long long i = vt_gid(); i < n; i += vt_gstride()) {
        vt_st(t, i, vt_ld(t, i) + bias[(int)i % c]);
    }
}

VT_KERNEL add_channel_bias(float* t, const float* bias, int rows, int c)
{
    add_channel_bias_t(t, bias, rows, c);
}

// add_channel_bias_bf16: add_channel_bias for a bf16 t (bias float32), the
// sum rounded to bf16.
VT_KERNEL add_channel_bias_bf16(unsigned short* t, const float* bias, int rows, int c)
{
    add_channel_bias_t(t, bias, rows, c);
}

// concat_channels: dst[v] = (a[v][0..ca), b[v][0..cb)) for each of voxels
// voxels. Work: voxels*(ca+cb).
template <typename T>
__device__ __forceinline__ void concat_channels_t(const T* a, const T* b, T* dst, int voxels, int ca, int cb)
{
    const int c = ca + cb;
    const long long n = (long long)voxels * c;
    if (ca % VT_VEC == 0 && cb % VT_VEC == 0 && vt_aligned16(a) && vt_aligned16(b) && vt_aligned16(dst)) {
        // VT_VEC channels (16 bytes of bf16s) per thread and step.
        const int c8 = c / VT_VEC, ca8 = ca / VT_VEC, cb8 = cb / VT_VEC;
        for (long long i8 = vt_gid(); i8 < n / VT_VEC; i8 += vt_gstride()) {
            const int v = (int)i8 / c8;
            const int j8 = (int)i8 % c8;
            vt_cp8(dst + i8 * VT_VEC, j8 < ca8 ? a + (v * ca8 + j8) * VT_VEC : b + (v * cb8 + (j8 - ca8)) * VT_VEC);
        }
        return;
    }
    for (long long i = vt_gid(); i < n; i += vt_gstride()) {
        const int v = (int)i / c;
        const int j = (int)i % c;
        dst[i] = j < ca ? a[v * ca + j] : b[v * cb + (j - ca)];
    }
}

VT_KERNEL concat_channels(const float* a, const float* b, float* dst, int voxels, int ca, int cb)
{
    concat_channels_t(a, b, dst, voxels, ca, cb);
}

// concat_channels_bf16: concat_channels for bf16 a, b and dst: the bits
// are copied (as widening and rounding would give, but for signalling-NaN
// patterns, which rounding would quiet).
VT_KERNEL concat_channels_bf16(const unsigned short* a, const unsigned short* b, unsigned short* dst, int voxels,
                               int ca, int cb)
{
    concat_channels_t(a, b, dst, voxels, ca, cb);
}

// split_channels: the adjoint of concat_channels; a receives the first ca
// channels of src, b the last cb. Work: voxels*(ca+cb).
template <typename T>
__device__ __forceinline__ void split_channels_t(const T* src, T* a, T* b, int voxels, int ca, int cb)
{
    const int c = ca + cb;
    const long long n = (long long)voxels * c;
    if (ca % VT_VEC == 0 && cb % VT_VEC == 0 && vt_aligned16(a) && vt_aligned16(b) && vt_aligned16(src)) {
        const int c8 = c / VT_VEC, ca8 = ca / VT_VEC, cb8 = cb / VT_VEC;
        for (long long i8 = vt_gid(); i8 < n / VT_VEC; i8 += vt_gstride()) {
            const int v = (int)i8 / c8;
            const int j8 = (int)i8 % c8;
            vt_cp8(j8 < ca8 ? a + (v * ca8 + j8) * VT_VEC : b + (v * cb8 + (j8 - ca8)) * VT_VEC, src + i8 * VT_VEC);
        }
        return;
    }
    for (long long i = vt_gid(); i < n; i += vt_gstride()) {
        const int v = (int)i / c;
        const int j = (int)i % c;
        if (j < ca) {
            a[v * ca + j] = src[i];
        } else {
            b[v * cb + (j - ca)] = src[i];
        }
    }
}

VT_KERNEL split_channels(const float* src, float* a, float* b, int voxels, int ca, int cb)
{
    split_channels_t(src, a, b, voxels, ca, cb);
}

// split_channels_bf16: split_channels for bf16 src, a and b (a concat's
// gradient): the bits are copied, as concat_channels_bf16's.
VT_KERNEL split_channels_bf16(const unsigned short* src, unsigned short* a, unsigned short* b, int voxels, int ca,
                              int cb)
{
    split_channels_t(src, a, b, voxels, ca, cb);
}

// ncdhw_to_ndhwc: dst[n][v][c] = src[n][c][v] for nb samples of c channels
// and v voxels. One thread per destination element (writes coalesced).
// Work: nb*c*v.
VT_KERNEL ncdhw_to_ndhwc(const float* src, float* dst, int nb, int c, int v)
{
    const long long total = (long long)nb * c * v;
    for (long long i = vt_gid(); i < total; i += vt_gstride()) {
        const int ch = (int)i % c;
        const int vox = (int)i / c;
        const int b = vox / v;
        const int p = vox % v;
        dst[i] = src[(b * c + ch) * v + p];
    }
}

// ndhwc_to_ncdhw: dst[n][c][v] = src[n][v][c]. Work: nb*c*v.
VT_KERNEL ndhwc_to_ncdhw(const float* src, float* dst, int nb, int c, int v)
{
    const long long total = (long long)nb * c * v;
    for (long long i = vt_gid(); i < total; i += vt_gstride()) {
        const int p = (int)i % v;
        const int bc = (int)i / v;
        const int b = bc / c;
        const int ch = bc % c;
        dst[i] = src[(b * v + p) * c + ch];
    }
}

// channel_affine_add: dst[n][v][c] += alpha[n*c+c']*a[n][v][c] + beta[n*c+c']
// (added in that order, as two float adds). a (with alpha) and beta may each
// be null. Work: nb*v*c.
VT_KERNEL channel_affine_add(float* dst, const float* a, const float* alpha, const float* beta, int nb, int v, int c)
{
    const long long total = (long long)nb * v * c;
    const int per = v * c;
    for (long long i = vt_gid(); i < total; i += vt_gstride()) {
        const int k = ((int)i / per) * c + (int)i % c;
        float d = dst[i];
        if (a != nullptr) {
            d += alpha[k] * a[i];
        }
        if (beta != nullptr) {
            d += beta[k];
        }
        dst[i] = d;
    }
}

// avg_pool: y (nb, d/kd, h/kh, w/kw, c) = the mean of each kd×kh×kw
// window of x (nb, d, h, w, c), windows at stride = size (PyTorch's
// AvgPool3d(k, k); an axis's remainder is left out). Each window is summed
// in float in (kd, kh, kw) order and divided by its size, as
// cpu.Device.AvgPool. Work: nb*od*oh*ow*c.
template <typename T>
__device__ __forceinline__ void avg_pool_t(const T* x, T* y, int nb, int d, int h, int w, int c, int kd, int kh,
                                           int kw)
{
    const int od = d / kd, oh = h / kh, ow = w / kw;
    const long long total = (long long)nb * od * oh * ow * c;
    const float count = (float)(kd * kh * kw);
    for (long long i = vt_gid(); i < total; i += vt_gstride()) {
        long long t = i;
        const int ch = (int)(t % c);
        t /= c;
        const int ox = (int)(t % ow);
        t /= ow;
        const int oy = (int)(t % oh);
        t /= oh;
        const int oz = (int)(t % od);
        const long long b = t / od;
        float s = 0.0f;
        for (int a = 0; a < kd; a++) {
            for (int e = 0; e < kh; e++) {
                const long long row = ((b * d + oz * kd + a) * h + oy * kh + e) * w + (long long)ox * kw;
                for (int f = 0; f < kw; f++) {
                    s += vt_ld(x, (row + f) * c + ch);
                }
            }
        }
        vt_st(y, i, s / count);
    }
}

VT_KERNEL avg_pool(const float* x, float* y, int nb, int d, int h, int w, int c, int kd, int kh, int kw)
{
    avg_pool_t(x, y, nb, d, h, w, c, kd, kh, kw);
}

// avg_pool_bf16: avg_pool for bf16 x and y (activations), the mean
// rounded to bf16.
VT_KERNEL avg_pool_bf16(const unsigned short* x, unsigned short* y, int nb, int d, int h, int w, int c, int kd, int kh,
                        int kw)
{
    avg_pool_t(x, y, nb, d, h, w, c, kd, kh, kw);
}

// avg_pool_backward: the adjoint of avg_pool: dx (nb, d, h, w, c) =
// dy / (kd·kh·kw) of the window holding the voxel, 0 in an axis's
// remainder. Work: nb*d*h*w*c.
template <typename T>
__device__ __forceinline__ void avg_pool_backward_t(const T* dy, T* dx, int nb, int d, int h, int w, int c, int kd,
                                                    int kh, int kw)
{
    const int od = d / kd, oh = h / kh, ow = w / kw;
    const long long total = (long long)nb * d * h * w * c;
    const float count = (float)(kd * kh * kw);
    for (long long i = vt_gid(); i < total; i += vt_gstride()) {
        long long t = i;
        const int ch = (int)(t % c);
        t /= c;
        const int x = (int)(t % w) / kw;
        t /= w;
        const int y = (int)(t % h) / kh;
        t /= h;
        const int z = (int)(t % d) / kd;
        const long long b = t / d;
        float g = 0.0f;
        if (z < od && y < oh && x < ow) {
            g = vt_ld(dy, (((b * od + z) * oh + y) * ow + x) * c + ch) / count;
        }
        vt_st(dx, i, g);
    }
}

VT_KERNEL avg_pool_backward(const float* dy, float* dx, int nb, int d, int h, int w, int c, int kd, int kh, int kw)
{
    avg_pool_backward_t(dy, dx, nb, d, h, w, c, kd, kh, kw);
}

// avg_pool_backward_bf16: avg_pool_backward for bf16 dy and dx
// (activation gradients).
VT_KERNEL avg_pool_backward_bf16(const unsigned short* dy, unsigned short* dx, int nb, int d, int h, int w, int c,
                                 int kd, int kh, int kw)
{
    avg_pool_backward_t(dy, dx, nb, d, h, w, c, kd, kh, kw);
}

// vt_nearest_exact is PyTorch's "nearest-exact" source index of output
// index o when resizing in -> out (as cpu.nearestExact, in double).
__device__ __forceinline__ int vt_nearest_exact(int o, int in, int out)
{
    int i = (int)(((double)o + 0.5) * (double)in / (double)out);
    return i < in - 1 ? i : in - 1;
}

// downsample_labels: dst (nb, od, oh, ow) takes src (nb, d, h, w) at the
// nearest-exact source voxel. Work: nb*od*oh*ow.
VT_KERNEL downsample_labels(const float* src, float* dst, int nb, int d, int h, int w, int od, int oh, int ow)
{
    const long long total = (long long)nb * od * oh * ow;
    for (long long i = vt_gid(); i < total; i += vt_gstride()) {
        int t = (int)i;
        const int x = t % ow;
        t /= ow;
        const int y = t % oh;
        t /= oh;
        const int z = t % od;
        const int b = t / od;
        const int iz = vt_nearest_exact(z, d, od);
        const int iy = vt_nearest_exact(y, h, oh);
        const int ix = vt_nearest_exact(x, w, ow);
        dst[i] = src[((b * d + iz) * h + iy) * w + ix];
    }
}

// one_hot: dst[v][c] = (labels[v] == c) for nvox voxels (all samples). A
// label that is not a class index in [0, c) leaves a zero row and lowers
// *bad (initialised to VT_NO_BAD_LABEL) to its flat voxel index.
// Work: nvox.
VT_KERNEL one_hot(const float* labels, float* dst, int* bad, int nvox, int c)
{
    for (long long v = vt_gid(); v < nvox; v += vt_gstride()) {
        const int l = vt_class(labels[v], c);
        float* row = dst + v * c;
        for (int j = 0; j < c; j++) {
            row[j] = j == l ? 1.0f : 0.0f;
        }
        if (l < 0) {
            atomicMin(bad, (int)v);
        }
    }
}
