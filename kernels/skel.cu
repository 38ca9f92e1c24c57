// skel.cu — clDice's soft skeleton (nn.Device.SoftSkeleton and its
// backward), as package cpu computes it (cpu/skel.go):
//
//   erode(x)  = min(min(minpool_d(x), minpool_h(x)), minpool_w(x))  (3-windows)
//   dilate(x) = maxpool 3×3×3
//   img_0 = x, img_{j+1} = erode(img_j), open_j = dilate(img_{j+1})
//   skel_0 = relu(x - open_0)
//   skel_j = skel_{j-1} + relu(δ_j - skel_{j-1}·δ_j),  δ_j = relu(img_j - open_j)
//
// on every channel c >= from_c of a channels-last tensor (n, d, h, w, c);
// pooling windows are clipped at the volume's border, ties of a pooling
// window go to the first voxel in scan order, and the gradient of a tied
// elementwise min splits in halves (PyTorch's autograd).
//
// The backward passes of the poolings are written as gathers — each input
// element adds, in the order package cpu's scatter loop would, the
// gradients of the windows whose arg-min/max it is — so no atomics are
// needed and the results are bit-identical to the CPU device's.
//
// Launch (all): 1-D blocks of VT_BLOCK threads, 1-D grid-stride grid,
// work n·d·h·w·c (one thread per element; channels below from_c are left
// alone), no shared memory. Every kernel takes the geometry as
// (n, d, h, w, c, from_c).
#include "common.cuh"

// vt_gomin and vt_gomax are Go's min and max on floats: NaN wins, and
// min(-0, +0) = -0, max(-0, +0) = +0.
__device__ __forceinline__ float vt_gomin(float a, float b)
{
    if (a != a) {
        return a;
    }
    if (b != b) {
        return b;
    }
    if (a < b) {
        return a;
    }
    if (b < a) {
        return b;
    }
    return (__float_as_uint(a) >> 31) != 0u ? a : b;
}

__device__ __forceinline__ float vt_gomax(float a, float b)
{
    if (a != a) {
        return a;
    }
    if (b != b) {
        return b;
    }
    if (a > b) {
        return a;
    }
    if (b > a) {
        return b;
    }
    return (__float_as_uint(a) >> 31) != 0u ? b : a;
}

// VtSkelGeom locates element i of a channels-last volume batch.
struct VtSkelGeom {
    int d, h, w, c;
    long long i;  // flat element index
    int ch;       // channel
    int z, y, x;  // voxel coordinates within the sample
};

__device__ __forceinline__ VtSkelGeom vt_skel_at(long long i, int d, int h, int w, int c)
{
    VtSkelGeom g;
    g.d = d;
    g.h = h;
    g.w = w;
    g.c = c;
    g.i = i;
    g.ch = (int)i % c;
    int v = (int)i / c;
    g.x = v % w;
    v /= w;
    g.y = v % h;
    g.z = (v / h) % d;
    return g;
}

// vt_minpool1 is the minimum of x over the 3-window along one axis at
// element i (position pos of size, element stride step) and its index, the
// first in scan order on ties (cpu.minPool1).
__device__ __forceinline__ float vt_minpool1(const float* x, long long i, int pos, int size, long long step,
                                             long long* arg)
{
    const int lo = pos - 1 > 0 ? pos - 1 : 0;
    const int hi = pos + 1 < size - 1 ? pos + 1 : size - 1;
    long long a = i + (long long)(lo - pos) * step;
    float best = x[a];
    for (int p = lo + 1; p <= hi; p++) {
        const long long j = i + (long long)(p - pos) * step;
        if (x[j] < best) {
            best = x[j];
            a = j;
        }
    }
    *arg = a;
    return best;
}

// vt_erode_at computes the three directional min-pools at g and their args.
__device__ __forceinline__ void vt_erode_at(const float* x, const VtSkelGeom& g, float p[3], long long arg[3])
{
    const long long sw = g.c, sh = (long long)g.w * g.c, sd = (long long)g.h * g.w * g.c;
    p[0] = vt_minpool1(x, g.i, g.z, g.d, sd, &arg[0]);
    p[1] = vt_minpool1(x, g.i, g.y, g.h, sh, &arg[1]);
    p[2] = vt_minpool1(x, g.i, g.x, g.w, sw, &arg[2]);
}

// vt_dilate_at is the max of x over the clipped 3×3×3 window at g and its
// index (first maximum in scan order; cpu.dilateAt).
__device__ __forceinline__ float vt_dilate_at(const float* x, const VtSkelGeom& g, long long* arg)
{
    const long long sw = g.c, sh = (long long)g.w * g.c, sd = (long long)g.h * g.w * g.c;
    float best = 0.0f;
    long long a = -1;
    for (int dz = -1; dz <= 1; dz++) {
        if (g.z + dz < 0 || g.z + dz >= g.d) {
            continue;
        }
        for (int dy = -1; dy <= 1; dy++) {
            if (g.y + dy < 0 || g.y + dy >= g.h) {
                continue;
            }
            for (int dx = -1; dx <= 1; dx++) {
                if (g.x + dx < 0 || g.x + dx >= g.w) {
                    continue;
                }
                const long long j = g.i + dz * sd + dy * sh + dx * sw;
                if (a < 0 || x[j] > best) {
                    best = x[j];
                    a = j;
                }
            }
        }
    }
    *arg = a;
    return best;
}

// skel_erode: dst = erode(src).
VT_KERNEL skel_erode(const float* src, float* dst, int n, int d, int h, int w, int c, int from_c)
{
    const long long total = (long long)n * d * h * w * c;
    for (long long i = vt_gid(); i < total; i += vt_gstride()) {
        const VtSkelGeom g = vt_skel_at(i, d, h, w, c);
        if (g.ch < from_c) {
            continue;
        }
        float p[3];
        long long arg[3];
        vt_erode_at(src, g, p, arg);
        dst[i] = vt_gomin(vt_gomin(p[0], p[1]), p[2]);
    }
}

// skel_dilate: dst = dilate(src).
VT_KERNEL skel_dilate(const float* src, float* dst, int n, int d, int h, int w, int c, int from_c)
{
    const long long total = (long long)n * d * h * w * c;
    for (long long i = vt_gid(); i < total; i += vt_gstride()) {
        const VtSkelGeom g = vt_skel_at(i, d, h, w, c);
        if (g.ch < from_c) {
            continue;
        }
        long long arg;
        dst[i] = vt_dilate_at(src, g, &arg);
    }
}

// skel_init: skel = relu(x - open_0) on channels >= from_c and 0 below.
VT_KERNEL skel_init(const float* x, const float* open, float* skel, int n, int d, int h, int w, int c, int from_c)
{
    const long long total = (long long)n * d * h * w * c;
    for (long long i = vt_gid(); i < total; i += vt_gstride()) {
        skel[i] = (int)i % c < from_c ? 0.0f : vt_gomax(x[i] - open[i], 0.0f);
    }
}

// skel_step: out = prev + relu(δ - prev·δ), δ = relu(img - open). out may
// alias prev.
VT_KERNEL skel_step(const float* img, const float* open, const float* prev, float* out, int n, int d, int h, int w,
                    int c, int from_c)
{
    const long long total = (long long)n * d * h * w * c;
    for (long long i = vt_gid(); i < total; i += vt_gstride()) {
        if ((int)i % c < from_c) {
            continue;
        }
        const float delta = vt_gomax(img[i] - open[i], 0.0f);
        const float p = prev[i];
        out[i] = p + vt_gomax(delta - p * delta, 0.0f);
    }
}

// skel_bwd_step: one step j of the backward through the skeleton updates
// (cpu.softSkelBackward's loop body): with u = img_j - open_j, for j = 0
// (prev null) du = u > 0 ? ds : 0; otherwise δ = relu(u),
// dt = δ - prev·δ > 0 ? ds : 0, ds -= dt·δ, du = u > 0 ? dt·(1 - prev) : 0.
// Then dimg += du and dopen = -du.
VT_KERNEL skel_bwd_step(const float* img, const float* open, const float* prev, float* ds, float* dimg, float* dopen,
                        int n, int d, int h, int w, int c, int from_c)
{
    const long long total = (long long)n * d * h * w * c;
    for (long long i = vt_gid(); i < total; i += vt_gstride()) {
        if ((int)i % c < from_c) {
            continue;
        }
        float du;
        if (prev == nullptr) {
            du = img[i] - open[i] > 0.0f ? ds[i] : 0.0f;
        } else {
            const float u = img[i] - open[i];
            const float delta = vt_gomax(u, 0.0f);
            const float p = prev[i];
            const float dt = delta - p * delta > 0.0f ? ds[i] : 0.0f;
            const float ddelta = dt * (1.0f - p);
            ds[i] -= dt * delta;
            du = u > 0.0f ? ddelta : 0.0f;
        }
        dimg[i] += du;
        dopen[i] = -du;
    }
}

// skel_dilate_bwd: dx += the gradient of Σ dy·dilate(x) (x: the dilate's
// input): each element adds dy of the windows whose arg-max it is, windows
// in scan order, skipping zero dy (cpu.dilateBackward).
VT_KERNEL skel_dilate_bwd(const float* x, const float* dy, float* dx, int n, int d, int h, int w, int c, int from_c)
{
    const long long total = (long long)n * d * h * w * c;
    for (long long i = vt_gid(); i < total; i += vt_gstride()) {
        const VtSkelGeom g = vt_skel_at(i, d, h, w, c);
        if (g.ch < from_c) {
            continue;
        }
        const long long sw = c, sh = (long long)w * c, sd = (long long)h * w * c;
        float acc = dx[i];
        for (int dz = -1; dz <= 1; dz++) {
            if (g.z + dz < 0 || g.z + dz >= d) {
                continue;
            }
            for (int dyy = -1; dyy <= 1; dyy++) {
                if (g.y + dyy < 0 || g.y + dyy >= h) {
                    continue;
                }
                for (int dxx = -1; dxx <= 1; dxx++) {
                    if (g.x + dxx < 0 || g.x + dxx >= w) {
                        continue;
                    }
                    const long long ctr = i + dz * sd + dyy * sh + dxx * sw;
                    const float gy = dy[ctr];
                    if (gy == 0.0f) {
                        continue;
                    }
                    const VtSkelGeom gc = vt_skel_at(ctr, d, h, w, c);
                    long long arg;
                    vt_dilate_at(x, gc, &arg);
                    if (arg == i) {
                        acc += gy;
                    }
                }
            }
        }
        dx[i] = acc;
    }
}

// vt_min_grad splits gradient g of min(u, v) as PyTorch does: all to the
// smaller, halves on a tie (cpu.minGrad).
__device__ __forceinline__ void vt_min_grad(float u, float v, float g, float* du, float* dv)
{
    if (u < v) {
        *du = g;
        *dv = 0.0f;
    } else if (v < u) {
        *du = 0.0f;
        *dv = g;
    } else {
        *du = g / 2.0f;
        *dv = g / 2.0f;
    }
}

// skel_erode_bwd: dx += the gradient of Σ dy·erode(x): the windows that can
// have element i as an arg-min are centred on i and its six axis
// neighbours; they are visited in scan order, each adding its three
// directional gradients in axis order (cpu.erodeBackward), skipping zero dy.
VT_KERNEL skel_erode_bwd(const float* x, const float* dy, float* dx, int n, int d, int h, int w, int c, int from_c)
{
    const long long total = (long long)n * d * h * w * c;
    for (long long i = vt_gid(); i < total; i += vt_gstride()) {
        const VtSkelGeom g = vt_skel_at(i, d, h, w, c);
        if (g.ch < from_c) {
            continue;
        }
        const long long sw = c, sh = (long long)w * c, sd = (long long)h * w * c;
        const long long ctrs[7] = {-sd, -sh, -sw, 0, sw, sh, sd};
        const bool ok[7] = {g.z > 0, g.y > 0, g.x > 0, true, g.x < w - 1, g.y < h - 1, g.z < d - 1};
        float acc = dx[i];
        for (int k = 0; k < 7; k++) {
            if (!ok[k]) {
                continue;
            }
            const long long ctr = i + ctrs[k];
            const float gy = dy[ctr];
            if (gy == 0.0f) {
                continue;
            }
            float p[3], dp[3], dq;
            long long arg[3];
            vt_erode_at(x, vt_skel_at(ctr, d, h, w, c), p, arg);
            vt_min_grad(vt_gomin(p[0], p[1]), p[2], gy, &dq, &dp[2]);
            vt_min_grad(p[0], p[1], dq, &dp[0], &dp[1]);
            for (int a = 0; a < 3; a++) {
                if (arg[a] == i) {
                    acc += dp[a];
                }
            }
        }
        dx[i] = acc;
    }
}

// skel_accum: dst += src on channels >= from_c.
VT_KERNEL skel_accum(float* dst, const float* src, int n, int d, int h, int w, int c, int from_c)
{
    const long long total = (long long)n * d * h * w * c;
    for (long long i = vt_gid(); i < total; i += vt_gstride()) {
        if ((int)i % c >= from_c) {
            dst[i] += src[i];
        }
    }
}
