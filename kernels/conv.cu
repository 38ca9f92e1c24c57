// conv.cu — vol2col and col2vol: the data movement around cuBLAS that makes
// a 3D convolution an implicit GEMM, in voxtrain's layouts (see cpu/kern):
//
//   x   (N, InD, InH, InW, InC)   channels-last activations
//   w   (OutC, KD, KH, KW, InC)   weights: row co is a K-vector
//   y   (N, OD, OH, OW, OutC)     OD = (InD + 2PD - KD)/SD + 1, etc.
//
// The vol2col matrix has one row per output voxel m (flat (n, od, oh, ow)
// order) and K = KD*KH*KW*InC columns in (kd, kh, kw, ci) order:
//
//   col[m][k] = x[n, od*SD-PD+kd, oh*SH-PH+kh, ow*SW-PW+kw, ci]  (0 outside)
//
// so for a tile of rows [m0, m0+rows):
//   forward          y[m0..][co]  = col · wᵀ         (GEMM rows×K by K×OutC)
//   backward-weight  dw[co][k]   += dyᵀ · col         (sum over tiles)
//   backward-data    dcol = dy · w, then col2vol(dcol) adds into dx
//
// The whole matrix is never materialised: package gpu builds it a tile of
// rows at a time (kernels.Vol2ColTileRows) and hands each tile to cuBLAS.
//
// ConvTranspose3d with kernel 2, stride 2 (the U-Net's up-sampling) is the
// backward-data of the convolution with geometry (In = fine size, K = 2,
// S = 2, P = 0) and its backward-data is that convolution's forward, so
// these two kernels with that geometry are all it needs: with K = S and
// P = 0 the rows do not overlap, vol2col is a permutation and col2vol its
// inverse (each input element receives exactly one contribution).
//
// Launch: 1-D blocks of VT_BLOCK threads, 1-D grid of any size >= 1
// (grid-stride, so any grid covers all the work), no shared memory.
//
// Speed: the first version gave every thread one matrix element and paid
// seven 32-bit integer divisions for it; on an H200 that made vol2col and
// col2vol most of a convolution's time, more than cuBLAS's GEMM. When
// in_c is a multiple of 4 (every layer but the network's input), a thread
// (and x and col 16-byte aligned, as device allocations are) now owns one
// group of 4 channels of one row (vol2col) or one input voxel
// (col2vol), decomposes its index once and walks the kernel taps with
// 16-byte loads and stores: neighbouring threads hold neighbouring channel
// groups, so a warp's accesses stay contiguous. The element order of every
// sum is unchanged, so results are bit-identical to the scalar path.
#include "common.cuh"

// vt_out_size is a convolution's output length along one axis.
__device__ __forceinline__ int vt_out_size(int in, int pad, int k, int stride)
{
    return (in + 2 * pad - k) / stride + 1;
}

// vt_unflatten splits a flat (n, d, h, w) index m over a d_ × h_ × w_ grid.
__device__ __forceinline__ void vt_unflatten(int m, int d_, int h_, int w_, int& n, int& d, int& h, int& w)
{
    w = m % w_;
    m /= w_;
    h = m % h_;
    m /= h_;
    d = m % d_;
    n = m / d_;
}

// vt_col_f32 and vt_col_bf16 store vol2col matrix elements, one at a
// time or in groups of 4 (16 bytes of float32, 8 of bfloat16).
struct vt_col_f32 {
    float* col;
    __device__ __forceinline__ void put4(long long i, vt_f4 v) const { *(vt_f4*)(col + i) = v; }
    __device__ __forceinline__ void put1(long long i, float v) const { col[i] = v; }
};

struct vt_col_bf16 {
    unsigned short* col;
    __device__ __forceinline__ void put4(long long i, vt_f4 v) const
    {
        vt_h4 h;
        h.x = vt_bf16(v.x);
        h.y = vt_bf16(v.y);
        h.z = vt_bf16(v.z);
        h.w = vt_bf16(v.w);
        *(vt_h4*)(col + i) = h;
    }
    __device__ __forceinline__ void put1(long long i, float v) const { col[i] = vt_bf16(v); }
};

// vt_ld4 loads 4 consecutive float32s (16-byte aligned) or bfloat16s
// (8-byte aligned, widened exactly) as floats.
__device__ __forceinline__ vt_f4 vt_ld4(const float* p)
{
    return *(const vt_f4*)p;
}

__device__ __forceinline__ vt_f4 vt_ld4(const unsigned short* p)
{
    const vt_h4 h = *(const vt_h4*)p;
    vt_f4 v;
    v.x = __uint_as_float((unsigned int)h.x << 16);
    v.y = __uint_as_float((unsigned int)h.y << 16);
    v.z = __uint_as_float((unsigned int)h.z << 16);
    v.w = __uint_as_float((unsigned int)h.w << 16);
    return v;
}

// vt_vol2col_groups is the loop of the vol2col kernels: a thread per row
// of the tile and group of vec channels (vec 4: x and the store's groups
// aligned for vt_ld4 and col; vec 1: any in_c) decomposes its row once and
// walks the kernel taps, storing each tap's group through col. x holds
// float32s or bfloat16s (T).
template <class Col, typename T>
__device__ __forceinline__ void vt_vol2col_groups(const T* x, Col col, int vec,
                                                  int in_d, int in_h, int in_w, int in_c,
                                                  int kd_, int kh_, int kw_,
                                                  int sd, int sh, int sw,
                                                  int pd, int ph, int pw,
                                                  int m0, int rows)
{
    const int od_ = vt_out_size(in_d, pd, kd_, sd);
    const int oh_ = vt_out_size(in_h, ph, kh_, sh);
    const int ow_ = vt_out_size(in_w, pw, kw_, sw);
    const int kk = kd_ * kh_ * kw_ * in_c;
    const int groups = in_c / vec;
    const long long total = (long long)rows * groups;
    for (long long e = vt_gid(); e < total; e += vt_gstride()) {
        const int r = (int)e / groups;
        const int ci = ((int)e - r * groups) * vec;
        int n, od, oh, ow;
        vt_unflatten(m0 + r, od_, oh_, ow_, n, od, oh, ow);
        long long dst = (long long)r * kk + ci;
        const T* src = x + ci;
        for (int kd = 0; kd < kd_; kd++) {
            const int id = od * sd - pd + kd;
            const bool okd = id >= 0 && id < in_d;
            for (int kh = 0; kh < kh_; kh++) {
                const int ih = oh * sh - ph + kh;
                const bool okh = okd && ih >= 0 && ih < in_h;
                for (int kw = 0; kw < kw_; kw++) {
                    const int iw = ow * sw - pw + kw;
                    const bool ok = okh && iw >= 0 && iw < in_w;
                    const T* s = src + (((n * in_d + id) * in_h + ih) * in_w + iw) * in_c;
                    if (vec == 4) {
                        vt_f4 v = {0.0f, 0.0f, 0.0f, 0.0f};
                        if (ok) {
                            v = vt_ld4(s);
                        }
                        col.put4(dst, v);
                    } else {
                        col.put1(dst, ok ? vt_ld(s, 0) : 0.0f);
                    }
                    dst += in_c;
                }
            }
        }
    }
}

// vol2col writes rows [m0, m0+rows) of the vol2col matrix of x into col
// (rows × K, row-major).
VT_KERNEL vol2col(const float* x, float* col,
                  int in_d, int in_h, int in_w, int in_c,
                  int kd_, int kh_, int kw_,
                  int sd, int sh, int sw,
                  int pd, int ph, int pw,
                  int m0, int rows)
{
    const int od_ = vt_out_size(in_d, pd, kd_, sd);
    const int oh_ = vt_out_size(in_h, ph, kh_, sh);
    const int ow_ = vt_out_size(in_w, pw, kw_, sw);
    const int kk = kd_ * kh_ * kw_ * in_c;
    if (in_c % 4 == 0 && vt_aligned16(x) && vt_aligned16(col)) {
        vt_vol2col_groups(x, vt_col_f32{col}, 4, in_d, in_h, in_w, in_c, kd_, kh_, kw_,
                          sd, sh, sw, pd, ph, pw, m0, rows);
        return;
    }
    // Scalar path (in_c = 1, 2, 3, ...): one element per thread, which
    // keeps the writes contiguous when rows are short.
    const long long total = (long long)rows * kk;
    for (long long e = vt_gid(); e < total; e += vt_gstride()) {
        // rows·K and every flat index fit in int (kernels.Ops checks), and
        // 32-bit division is several times cheaper than 64-bit on GPUs.
        const int r = (int)e / kk;
        int k = (int)e % kk;
        const int ci = k % in_c;
        k /= in_c;
        const int kw = k % kw_;
        k /= kw_;
        const int kh = k % kh_;
        const int kd = k / kh_;
        int n, od, oh, ow;
        vt_unflatten(m0 + r, od_, oh_, ow_, n, od, oh, ow);
        const int id = od * sd - pd + kd;
        const int ih = oh * sh - ph + kh;
        const int iw = ow * sw - pw + kw;
        float v = 0.0f;
        if (id >= 0 && id < in_d && ih >= 0 && ih < in_h && iw >= 0 && iw < in_w) {
            v = x[(((n * in_d + id) * in_h + ih) * in_w + iw) * in_c + ci];
        }
        col[e] = v;
    }
}

// vol2col_bf16 is vol2col writing the matrix in bfloat16 (vt_bf16
// rounding), the GEMM operand of the bf16 mixed-precision convolutions:
// half the bytes of the float32 matrix.
VT_KERNEL vol2col_bf16(const float* x, unsigned short* col,
                       int in_d, int in_h, int in_w, int in_c,
                       int kd_, int kh_, int kw_,
                       int sd, int sh, int sw,
                       int pd, int ph, int pw,
                       int m0, int rows)
{
    const int vec = in_c % 4 == 0 && vt_aligned16(x) && vt_aligned8(col) ? 4 : 1;
    vt_vol2col_groups(x, vt_col_bf16{col}, vec, in_d, in_h, in_w, in_c, kd_, kh_, kw_,
                      sd, sh, sw, pd, ph, pw, m0, rows);
}

// vol2col_bf16x is vol2col_bf16 for a bfloat16 x (a bf16 activation, or
// activation gradient): the matrix of the widened x, whose bf16 values it
// copies (rounding a widened bf16 gives it back, but for signalling NaNs,
// which it quiets as widening and vol2col_bf16 would).
VT_KERNEL vol2col_bf16x(const unsigned short* x, unsigned short* col,
                        int in_d, int in_h, int in_w, int in_c,
                        int kd_, int kh_, int kw_,
                        int sd, int sh, int sw,
                        int pd, int ph, int pw,
                        int m0, int rows)
{
    const int vec = in_c % 4 == 0 && vt_aligned8(x) && vt_aligned8(col) ? 4 : 1;
    vt_vol2col_groups(x, vt_col_bf16{col}, vec, in_d, in_h, in_w, in_c, kd_, kh_, kw_,
                      sd, sh, sw, pd, ph, pw, m0, rows);
}

// vt_tap returns the output coordinate o whose tap k reads input coordinate
// i (o*s - p + k = i), or -1 when there is none in [0, o_).
__device__ __forceinline__ int vt_tap(int i, int p, int k, int s, int o_)
{
    const int t = i + p - k;
    if (t < 0) {
        return -1;
    }
    int o = t;
    if (s != 1) {
        if (t % s != 0) {
            return -1;
        }
        o = t / s;
    }
    return o < o_ ? o : -1;
}

// vt_col2vol_gather returns, for channels [ci, ci+vec) of input voxel vox
// (flat (n, d, h, w)), the sums in fixed (kd, kh, kw) order of the entries
// of dcol — rows [m0, m0+rows) of the vol2col matrix — that vol2col would
// have read from them (vec 4: dcol 16-byte aligned; in .x for vec 1).
__device__ __forceinline__ vt_f4 vt_col2vol_gather(const float* dcol, int vec, int vox, int ci,
                                                   int in_d, int in_h, int in_w, int in_c,
                                                   int kd_, int kh_, int kw_,
                                                   int sd, int sh, int sw,
                                                   int pd, int ph, int pw,
                                                   int m0, int rows)
{
    const int od_ = vt_out_size(in_d, pd, kd_, sd);
    const int oh_ = vt_out_size(in_h, ph, kh_, sh);
    const int ow_ = vt_out_size(in_w, pw, kw_, sw);
    const int kk = kd_ * kh_ * kw_ * in_c;
    const int mhi = m0 + rows;
    int n, id, ih, iw;
    vt_unflatten(vox, in_d, in_h, in_w, n, id, ih, iw);
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    for (int kd = 0; kd < kd_; kd++) {
        const int od = vt_tap(id, pd, kd, sd, od_);
        if (od < 0) {
            continue;
        }
        for (int kh = 0; kh < kh_; kh++) {
            const int oh = vt_tap(ih, ph, kh, sh, oh_);
            if (oh < 0) {
                continue;
            }
            for (int kw = 0; kw < kw_; kw++) {
                const int ow = vt_tap(iw, pw, kw, sw, ow_);
                if (ow < 0) {
                    continue;
                }
                const int m = ((n * od_ + od) * oh_ + oh) * ow_ + ow;
                if (m < m0 || m >= mhi) {
                    continue;
                }
                const float* src = dcol + (long long)(m - m0) * kk + ((kd * kh_ + kh) * kw_ + kw) * in_c + ci;
                if (vec == 4) {
                    const vt_f4 v = *(const vt_f4*)src;
                    a0 += v.x;
                    a1 += v.y;
                    a2 += v.z;
                    a3 += v.w;
                } else {
                    a0 += *src;
                }
            }
        }
    }
    vt_f4 a;
    a.x = a0;
    a.y = a1;
    a.z = a2;
    a.w = a3;
    return a;
}

// col2vol adds to dx the adjoint of vol2col applied to dcol, the rows
// [m0, m0+rows) of the matrix: for every input element of the voxels
// [vlo, vlo+vcount) (flat (n, d, h, w) order; kernels.Col2VolRange gives
// the range a tile touches) it gathers, in fixed (kd, kh, kw) order, the
// entries of dcol that vol2col would have read from it, and adds their sum.
// A gather, not a scatter with atomics, so the result is deterministic; dx
// must be zeroed before the first tile and the tiles run in order.
VT_KERNEL col2vol(const float* dcol, float* dx,
                  int in_d, int in_h, int in_w, int in_c,
                  int kd_, int kh_, int kw_,
                  int sd, int sh, int sw,
                  int pd, int ph, int pw,
                  int m0, int rows, int vlo, int vcount)
{
    const int vec = in_c % 4 == 0 && vt_aligned16(dcol) && vt_aligned16(dx) ? 4 : 1;
    const int groups = in_c / vec;
    const long long total = (long long)vcount * groups;
    for (long long e = vt_gid(); e < total; e += vt_gstride()) {
        const int g = (int)e / groups;
        const int vox = vlo + g;
        const int ci = ((int)e - g * groups) * vec;
        const vt_f4 a = vt_col2vol_gather(dcol, vec, vox, ci, in_d, in_h, in_w, in_c, kd_, kh_, kw_,
                                          sd, sh, sw, pd, ph, pw, m0, rows);
        float* dst = dx + (long long)vox * in_c + ci;
        if (vec == 4) {
            vt_f4 o = *(vt_f4*)dst;
            o.x += a.x;
            o.y += a.y;
            o.z += a.z;
            o.w += a.w;
            *(vt_f4*)dst = o;
        } else {
            *dst += a.x;
        }
    }
}

// col2vol_bf16 is col2vol into a bfloat16 dx, which holds each element
// rounded once from the float32 sum col2vol would accumulate in a float32
// dx over the tiles — bit for bit — without a float32 dx: a voxel's sum is
// final once no later tile reaches it (tiles run in order of their rows,
// and so of Col2VolRange's lo), and until then it waits in a small float32
// carry. Of this tile's voxels [vlo, vlo+vcount), those below carried
// start from the partial sums the previous tile left in cin (indexed from
// vlo), the others from zero; those below done (the next tile's first
// voxel; for the last tile, all) are rounded into dx, the others left in
// cout (indexed from done) for the next tile. dx must be zeroed
// before the first tile (voxels no tile reaches stay zero).
VT_KERNEL col2vol_bf16(const float* dcol, unsigned short* dx, const float* cin, float* cout,
                       int in_d, int in_h, int in_w, int in_c,
                       int kd_, int kh_, int kw_,
                       int sd, int sh, int sw,
                       int pd, int ph, int pw,
                       int m0, int rows, int vlo, int vcount, int carried, int done)
{
    const int vec = in_c % 4 == 0 && vt_aligned16(dcol) ? 4 : 1;
    const int groups = in_c / vec;
    const long long total = (long long)vcount * groups;
    for (long long e = vt_gid(); e < total; e += vt_gstride()) {
        const int g = (int)e / groups;
        const int vox = vlo + g;
        const int ci = ((int)e - g * groups) * vec;
        const vt_f4 a = vt_col2vol_gather(dcol, vec, vox, ci, in_d, in_h, in_w, in_c, kd_, kh_, kw_,
                                          sd, sh, sw, pd, ph, pw, m0, rows);
        const float as[4] = {a.x, a.y, a.z, a.w};
        for (int q = 0; q < vec; q++) {
            // As col2vol's dx += sum over a zeroed or carried dx.
            float s = 0.0f;
            if (vox < carried) {
                s = cin[(long long)g * in_c + ci + q];
            }
            s += as[q];
            if (vox < done) {
                dx[(long long)vox * in_c + ci + q] = vt_bf16(s);
            } else {
                cout[(long long)(vox - done) * in_c + ci + q] = s;
            }
        }
    }
}
