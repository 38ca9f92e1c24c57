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
// (grid-stride), no shared memory. Work: rows*K elements (vol2col),
// vcount*InC elements (col2vol).
#include "common.cuh"

// vol2col writes rows [m0, m0+rows) of the vol2col matrix of x into col
// (rows × K, row-major).
VT_KERNEL vol2col(const float* x, float* col,
                  int in_d, int in_h, int in_w, int in_c,
                  int kd_, int kh_, int kw_,
                  int sd, int sh, int sw,
                  int pd, int ph, int pw,
                  int m0, int rows)
{
    const int od_ = (in_d + 2 * pd - kd_) / sd + 1;
    const int oh_ = (in_h + 2 * ph - kh_) / sh + 1;
    const int ow_ = (in_w + 2 * pw - kw_) / sw + 1;
    const int kk = kd_ * kh_ * kw_ * in_c;
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
        int m = m0 + r;
        const int ow = m % ow_;
        m /= ow_;
        const int oh = m % oh_;
        m /= oh_;
        const int od = m % od_;
        const int n = m / od_;
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
    const int od_ = (in_d + 2 * pd - kd_) / sd + 1;
    const int oh_ = (in_h + 2 * ph - kh_) / sh + 1;
    const int ow_ = (in_w + 2 * pw - kw_) / sw + 1;
    const int kk = kd_ * kh_ * kw_ * in_c;
    const long long total = (long long)vcount * in_c;
    const int mhi = m0 + rows;
    for (long long e = vt_gid(); e < total; e += vt_gstride()) {
        const int vox = vlo + (int)e / in_c;
        const int ci = (int)e % in_c;
        int t = vox;
        const int iw = t % in_w;
        t /= in_w;
        const int ih = t % in_h;
        t /= in_h;
        const int id = t % in_d;
        const int n = t / in_d;
        float acc = 0.0f;
        for (int kd = 0; kd < kd_; kd++) {
            const int td = id + pd - kd;
            if (td < 0 || td % sd != 0 || td / sd >= od_) {
                continue;
            }
            const int od = td / sd;
            for (int kh = 0; kh < kh_; kh++) {
                const int th = ih + ph - kh;
                if (th < 0 || th % sh != 0 || th / sh >= oh_) {
                    continue;
                }
                const int oh = th / sh;
                for (int kw = 0; kw < kw_; kw++) {
                    const int tw = iw + pw - kw;
                    if (tw < 0 || tw % sw != 0 || tw / sw >= ow_) {
                        continue;
                    }
                    const int ow = tw / sw;
                    const int m = ((n * od_ + od) * oh_ + oh) * ow_ + ow;
                    if (m < m0 || m >= mhi) {
                        continue;
                    }
                    const int k = ((kd * kh_ + kh) * kw_ + kw) * in_c + ci;
                    acc += dcol[(long long)(m - m0) * kk + k];
                }
            }
        }
        dx[(long long)vox * in_c + ci] += acc;
    }
}
