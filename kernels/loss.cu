// loss.cu — softmax over channels, the sums behind cross-entropy and soft
// Dice (nn.SegStats), their backward, sigmoid BCE, the multi-label
// sigmoid loss (BCE + soft Dice sums per channel) and its backward, and the
// TP/FP/FN counts of validation. Logits and probabilities are channels-last
// (N, V, C); labels are (N, V) floats: class indices, or bit-packed bytes
// for the multi-label kernels.
//
// nn.Device.SoftmaxLoss is four launches:
//   softmax_fwd          probs, and per (sample, chunk) the summed CE
//   seg_stats_partial    per (sample, chunk, class) Σp·[l=c], Σp, Σ[l=c]
//   reduce_chunks_f64 ×2 (reduce.cu) CE[n] (w = 1) and the class sums
//                        (w = 3C: intersect, pred sum, target sum)
// Labels that are not a class index lower a "first bad voxel" cell with
// atomicMin (order-independent), which the host turns into the error.
//
// The label kernels take an ignore label (loss.ignore_label; -1: none, as
// nn.Device's plain ops launch them): voxels labelled ignore add nothing
// to any sum or count, are not bad labels, and get a zero gradient
// (nn.IgnoreLossDevice). With ignore = -1 every kernel does exactly the
// arithmetic it did before the argument existed.
//
// Multi-label outputs (model.targets multi_label, loss dice_bce;
// nn.MultiLabelLossDevice) have one sigmoid channel per class and
// bit-packed labels: bit j of the label byte is set where the voxel is in
// class j, and 255 marks an ignored voxel when the ignore argument is 1.
// nn.MultiLabelLossDevice.SigmoidMultiLabelLoss is two launches:
//   sigmoid_multi_label_loss  probs = σ(logits), and per (sample, chunk,
//                             channel) the BCE sum, the counted voxels,
//                             Σσ·t, Σσ and Σt
//   reduce_chunks_f64         (reduce.cu, w = 5C) the same per sample
// whose BCE sums stay per sample and channel in SegStats, so that a class a
// sample's crop does not annotate can be left out of the loss on the host.
//
// The exponentials and logarithms are evaluated in double, as package cpu
// does, so probabilities agree with the CPU device to the last float bit
// except where the two libms round a double differently.
#include "common.cuh"

// vt_softmax_row writes p = softmax(z) over c channels as cpu.softmaxRow
// does (max, then exponentials and their sum in double, p rounded to float)
// and returns the max in *m and the sum in *s. p may alias z.
__device__ inline void vt_softmax_row(const float* z, float* p, int c, float* m_out, double* s_out)
{
    float m = z[0];
    for (int j = 1; j < c; j++) {
        m = z[j] > m ? z[j] : m;
    }
    double s = 0.0;
    for (int j = 0; j < c; j++) {
        s += exp((double)(z[j] - m));
    }
    for (int j = 0; j < c; j++) {
        p[j] = (float)(exp((double)(z[j] - m)) / s);
    }
    *m_out = m;
    *s_out = s;
}

// vt_ignored reports whether label l is the ignore label (ignore >= 0), as
// cpu.isIgnored does.
__device__ __forceinline__ bool vt_ignored(float l, int ignore)
{
    return ignore >= 0 && l == (float)ignore;
}

// softmax: probs[v][·] = softmax(logits[v][·]) over c channels for nvox
// voxels (nn.Device.Softmax). probs may alias logits. Launch: 1-D,
// grid-stride, work nvox.
VT_KERNEL softmax(const float* logits, float* probs, int nvox, int c)
{
    for (long long vox = vt_gid(); vox < nvox; vox += vt_gstride()) {
        float m;
        double s;
        vt_softmax_row(logits + vox * c, probs + vox * c, c, &m, &s);
    }
}

// softmax_fwd: probs[n][v][·] = softmax(logits[n][v][·]) and
// cepart[n*gridDim.x + k] = Σ_v (max + log Σexp - logit[label]) over the
// voxels of chunk k of sample n that have a valid label; an invalid label
// lowers *bad to its flat voxel index n*v + vox. Voxels labelled ignore
// get their probabilities but add to no sum; when cntpart is not null,
// cntpart[n*gridDim.x + k] = the chunk's voxels not labelled ignore
// (nn.SegStats.Counted). probs may alias logits. Launch: grid
// (ceil(v/chunk), nb), block VT_BLOCK, static shared 2 KiB.
VT_KERNEL softmax_fwd(const float* logits, const float* labels, float* probs, double* cepart, double* cntpart,
                      int* bad, int v, int c, int chunk, int ignore)
{
    const long long n = blockIdx.y;
    const long long lo = (long long)blockIdx.x * chunk;
    const long long hi = lo + chunk < v ? lo + chunk : v;
    double ce = 0.0;
    double counted = 0.0;
    for (long long vox = lo + threadIdx.x; vox < hi; vox += VT_BLOCK) {
        const long long flat = n * v + vox;
        const float* z = logits + flat * c;
        const float lf = labels[flat];
        const int l = vt_class(lf, c);
        const float zl = l >= 0 ? z[l] : 0.0f; // read before probs overwrites z when aliased
        float m;
        double s;
        vt_softmax_row(z, probs + flat * c, c, &m, &s);
        if (vt_ignored(lf, ignore)) {
            continue;
        }
        counted += 1.0;
        if (l < 0) {
            atomicMin(bad, (int)flat);
        } else {
            ce += (double)m + log(s) - (double)zl;
        }
    }
    ce = vt_block_sum(ce);
    if (threadIdx.x == 0) {
        cepart[n * gridDim.x + blockIdx.x] = ce;
    }
    if (cntpart != nullptr) { // uniform over the block: all threads sync
        counted = vt_block_sum(counted);
        if (threadIdx.x == 0) {
            cntpart[n * gridDim.x + blockIdx.x] = counted;
        }
    }
}

// seg_stats_partial: over the voxels of chunk k of sample n,
//   part[(n*gridDim.x + k)*3c + j]        = Σ p_j·[label = j]
//   part[(n*gridDim.x + k)*3c + c + j]    = Σ p_j
//   part[(n*gridDim.x + k)*3c + 2c + j]   = Σ [label = j]
// leaving out the voxels labelled ignore (soft Dice's loss_mask).
// Launch: grid (ceil(v/chunk), nb), block VT_BLOCK, static shared 6 KiB.
VT_KERNEL seg_stats_partial(const float* probs, const float* labels, double* part, int v, int c, int chunk,
                            int ignore)
{
    const long long n = blockIdx.y;
    const long long lo = (long long)blockIdx.x * chunk;
    const long long hi = lo + chunk < v ? lo + chunk : v;
    const float* pn = probs + n * v * c;
    const float* ln = labels + n * v;
    vt_chunk_channel_sums<3>(lo, hi, c, [=](long long vox, int j, double* acc) {
        if (vt_ignored(ln[vox], ignore)) {
            return;
        }
        const double p = (double)pn[vox * c + j];
        const bool hit = vt_class(ln[vox], c) == j;
        if (hit) {
            acc[0] += p;
            acc[2] += 1.0;
        }
        acc[1] += p;
    }, part + (n * gridDim.x + blockIdx.x) * 3 * c);
}

// softmax_loss_bwd: for each voxel, with q_j = beta[n,j] + alpha[n,j]·[l=j]
// + extra[v,j] (extra may be null) and dot = Σ_j p_j·q_j,
//   dlogits_j = p_j·(q_j - dot) + ce_scale[n]·p_j - ce_scale[n]·[l=j],
// the gradient through the softmax of ∂L/∂p = q plus ce_scale times the
// summed cross-entropy (nn.Device.SoftmaxLossBackward; soft Dice's backward
// is alpha/beta computed on the host from SegStats). ce_scale (nb), alpha,
// beta (nb*c) are device arrays. Voxels labelled ignore get dlogits 0.
// dlogits may alias probs. Launch: 1-D, grid-stride, work nb*v (one thread
// per voxel).
VT_KERNEL softmax_loss_bwd(const float* probs, const float* labels, const float* ce_scale, const float* alpha,
                           const float* beta, const float* extra, float* dlogits, int nb, int v, int c,
                           int ignore)
{
    const long long total = (long long)nb * v;
    for (long long vox = vt_gid(); vox < total; vox += vt_gstride()) {
        const int n = (int)vox / v;
        if (vt_ignored(labels[vox], ignore)) {
            float* dz = dlogits + vox * c;
            for (int j = 0; j < c; j++) {
                dz[j] = 0.0f;
            }
            continue;
        }
        const int l = vt_class(labels[vox], c);
        const float* al = alpha + n * c;
        const float* be = beta + n * c;
        const float cs = ce_scale[n];
        const float* p = probs + vox * c;
        const float* ex = extra != nullptr ? extra + vox * c : nullptr;
        float* dz = dlogits + vox * c;
        float dot = 0.0f;
        for (int j = 0; j < c; j++) {
            float q = be[j];
            if (j == l) {
                q += al[j];
            }
            if (ex != nullptr) {
                q += ex[j];
            }
            dot += p[j] * q;
        }
        for (int j = 0; j < c; j++) {
            float q = be[j];
            if (j == l) {
                q += al[j];
            }
            if (ex != nullptr) {
                q += ex[j];
            }
            const float pj = p[j];
            float d = pj * (q - dot) + cs * pj;
            if (j == l) {
                d -= cs;
            }
            dz[j] = d;
        }
    }
}

// vt_softplus is log(1 + exp(x)) without overflow.
__device__ __forceinline__ double vt_softplus(double x)
{
    return (x > 0.0 ? x : 0.0) + log1p(exp(-fabs(x)));
}

// sigmoid_bce: one-channel logits z and binary labels y: over the voxels of
// chunk k of sample n, part[n*gridDim.x + k] = Σ pw·y·softplus(-z) +
// (1-y)·softplus(z) (PyTorch's BCEWithLogits with pos_weight pw, summed),
// and dlogits = grad_scale·(σ(z)·(pw·y + 1 - y) - pw·y). A label other than
// 0 or 1 gets dlogits 0 and lowers *bad. Launch: grid (ceil(v/chunk), nb),
// block VT_BLOCK, static shared 2 KiB.
VT_KERNEL sigmoid_bce(const float* logits, const float* labels, float* dlogits, double* part, int* bad,
                      int v, int chunk, float pos_weight, float grad_scale)
{
    const long long n = blockIdx.y;
    const long long lo = (long long)blockIdx.x * chunk;
    const long long hi = lo + chunk < v ? lo + chunk : v;
    const double pw = (double)pos_weight;
    double sum = 0.0;
    for (long long vox = lo + threadIdx.x; vox < hi; vox += VT_BLOCK) {
        const long long flat = n * v + vox;
        const int y = vt_class(labels[flat], 2);
        if (y < 0) {
            atomicMin(bad, (int)flat);
            dlogits[flat] = 0.0f;
            continue;
        }
        const double z = (double)logits[flat];
        const double yf = (double)y;
        sum += pw * yf * vt_softplus(-z) + (1.0 - yf) * vt_softplus(z);
        const double sig = 1.0 / (1.0 + exp(-z));
        dlogits[flat] = grad_scale * (float)(sig * (pw * yf + 1.0 - yf) - pw * yf);
    }
    sum = vt_block_sum(sum);
    if (threadIdx.x == 0) {
        part[n * gridDim.x + blockIdx.x] = sum;
    }
}

// VT_MAX_COUNT_CLASSES bounds the classes seg_counts counts in shared memory;
// beyond it the kernel adds straight to global memory (same result).
#define VT_MAX_COUNT_CLASSES 256

// seg_counts: per-class true positives, false positives and false
// negatives of argmax(logits) (a one-channel map thresholded at 0 as
// classes {0, 1}) against the labels, over nvox voxels (all samples):
// counts[j] += TP_j, counts[k + j] += FP_j, counts[2k + j] += FN_j with
// k = max(c, 2); counts (3k) must be zeroed first. Ties of the argmax go to
// the lower class. Voxels labelled ignore are not counted; other invalid
// labels lower *bad. Launch: 1-D, grid-stride, work nvox, static shared
// 3 KiB.
VT_KERNEL seg_counts(const float* logits, const float* labels, unsigned long long* counts, int* bad,
                     int nvox, int c, int k, int ignore)
{
    __shared__ unsigned int cnt[3 * VT_MAX_COUNT_CLASSES];
    const bool local = k <= VT_MAX_COUNT_CLASSES;
    if (local) {
        for (int i = threadIdx.x; i < 3 * k; i += VT_BLOCK) {
            cnt[i] = 0;
        }
    }
    __syncthreads();
    for (long long vox = vt_gid(); vox < nvox; vox += vt_gstride()) {
        if (vt_ignored(labels[vox], ignore)) {
            continue;
        }
        const int l = vt_class(labels[vox], k);
        if (l < 0) {
            atomicMin(bad, (int)vox);
            continue;
        }
        const float* z = logits + vox * c;
        int pred = 0;
        if (c == 1) {
            pred = z[0] > 0.0f ? 1 : 0;
        } else {
            for (int j = 1; j < c; j++) {
                if (z[j] > z[pred]) {
                    pred = j;
                }
            }
        }
        if (local) {
            if (pred == l) {
                atomicAdd(&cnt[l], 1u);
            } else {
                atomicAdd(&cnt[k + pred], 1u);
                atomicAdd(&cnt[2 * k + l], 1u);
            }
        } else {
            if (pred == l) {
                atomicAdd(&counts[l], 1ull);
            } else {
                atomicAdd(&counts[k + pred], 1ull);
                atomicAdd(&counts[2 * k + l], 1ull);
            }
        }
    }
    __syncthreads();
    if (local) {
        for (int i = threadIdx.x; i < 3 * k; i += VT_BLOCK) {
            if (cnt[i] != 0) {
                atomicAdd(&counts[i], (unsigned long long)cnt[i]);
            }
        }
    }
}

// vt_bits returns the class bits of the bit-packed label l for c channels,
// or -1 when l is not an integer byte in [0, 255] whose set bits are all
// below c (NaN included). Matches cpu.bitsOf.
__device__ __forceinline__ int vt_bits(float l, int c)
{
    if (!(l >= 0.0f && l <= 255.0f)) {
        return -1;
    }
    const int k = (int)l;
    if ((float)k != l) {
        return -1;
    }
    if (c < 8 && (k >> c) != 0) {
        return -1;
    }
    return k;
}

// vt_bit reports whether bit j of label bits is set (channels past the
// byte's 8 bits never are).
__device__ __forceinline__ bool vt_bit(int bits, int j)
{
    return j < 8 && ((bits >> j) & 1) != 0;
}

// vt_ignored_byte reports whether bit-packed label l is the ignore byte 255
// and ignore is on.
__device__ __forceinline__ bool vt_ignored_byte(float l, int ignore)
{
    return ignore != 0 && l == 255.0f;
}

// sigmoid_multi_label_loss: probs = σ(logits) (every voxel) and, over the
// voxels of chunk k of sample n that are neither ignored nor badly
// labelled, with t = bit j of the label, per channel j:
//   part[(n*gridDim.x + k)*5c + j]        = Σ softplus(z) − t·z  (BCE with logits)
//   part[(n*gridDim.x + k)*5c + c + j]    = Σ 1                  (counted voxels)
//   part[(n*gridDim.x + k)*5c + 2c + j]   = Σ σ·t
//   part[(n*gridDim.x + k)*5c + 3c + j]   = Σ σ
//   part[(n*gridDim.x + k)*5c + 4c + j]   = Σ t
// as cpu.Device.SigmoidMultiLabelLoss sums them (σ rounded to float before
// it is summed). A label that is not a byte of c bits (nor 255 with
// ignore) lowers *bad to its flat voxel index n*v + vox. probs must not
// alias logits. Launch: grid (ceil(v/chunk), nb), block VT_BLOCK, static
// shared 10 KiB.
VT_KERNEL sigmoid_multi_label_loss(const float* logits, const float* labels, float* probs, double* part, int* bad,
                                   int v, int c, int chunk, int ignore)
{
    const long long n = blockIdx.y;
    const long long lo = (long long)blockIdx.x * chunk;
    const long long hi = lo + chunk < v ? lo + chunk : v;
    const float* zn = logits + n * v * c;
    float* pn = probs + n * v * c;
    const float* ln = labels + n * v;
    vt_chunk_channel_sums<5>(lo, hi, c, [=](long long vox, int j, double* acc) {
        const double z = (double)zn[vox * c + j];
        const float p = (float)(1.0 / (1.0 + exp(-z)));
        pn[vox * c + j] = p;
        const float lf = ln[vox];
        if (vt_ignored_byte(lf, ignore)) {
            return;
        }
        const int bits = vt_bits(lf, c);
        if (bits < 0) {
            atomicMin(bad, (int)(n * v + vox));
            return;
        }
        const double q = (double)p;
        acc[1] += 1.0;
        acc[3] += q;
        if (vt_bit(bits, j)) {
            acc[0] += vt_softplus(-z);
            acc[2] += q;
            acc[4] += 1.0;
        } else {
            acc[0] += vt_softplus(z);
        }
    }, part + (n * gridDim.x + blockIdx.x) * 5 * c);
}

// sigmoid_multi_label_loss_bwd: for each element (voxel, channel j) of
// sample n, with p = probs and t = bit j of the label,
//   dlogits = bce_scale[n,j]·(p − t) + (alpha[n,j]·t + beta[n,j])·p·(1 − p),
// the gradient of bce_scale times the summed BCE plus, through σ, of
// ∂L/∂p = alpha·t + beta (soft Dice's, from SegStats on the host), in
// cpu.Device.SigmoidMultiLabelLossBackward's float order. Ignored voxels
// (255 with ignore) and badly labelled ones get 0. bce_scale, alpha, beta
// (nb*c: per sample and channel, so that a class the sample's crop does not
// annotate gets 0) are device arrays. dlogits may alias probs. Launch: 1-D,
// grid-stride, work nb*v*c (one thread per element).
VT_KERNEL sigmoid_multi_label_loss_bwd(const float* probs, const float* labels, const float* bce_scale,
                                       const float* alpha, const float* beta, float* dlogits, int nb, int v,
                                       int c, int ignore)
{
    const long long total = (long long)nb * v * c;
    for (long long i = vt_gid(); i < total; i += vt_gstride()) {
        const int vox = (int)i / c;
        const int j = (int)i - vox * c;
        const int n = vox / v;
        const float lf = labels[vox];
        const int bits = vt_bits(lf, c);
        if (bits < 0 || vt_ignored_byte(lf, ignore)) {
            dlogits[i] = 0.0f;
            continue;
        }
        const float t = vt_bit(bits, j) ? 1.0f : 0.0f;
        const float g = alpha[n * c + j] * t + beta[n * c + j];
        const float p = probs[i];
        dlogits[i] = bce_scale[n * c + j] * (p - t) + g * p * (1.0f - p);
    }
}

// seg_counts_multi_label: true positives, false positives and false
// negatives of σ(logits) > 0.5 (logits > 0) against the labels' bits per
// sample and channel, over nvox voxels of samples of v voxels: for voxel
// vox of sample n = vox / v, counts[3c·n + j] += TP_j, counts[3c·n + c + j]
// += FP_j, counts[3c·n + 2c + j] += FN_j; counts (3c·nvox/v) must be
// zeroed first. Per sample, so that the classes a sample's crop does not
// annotate can be left out on the host. Ignored voxels (255 with ignore)
// are not counted; other labels that are not a byte of c bits lower *bad.
// Launch: 1-D, grid-stride, work nvox, static shared 3 KiB.
VT_KERNEL seg_counts_multi_label(const float* logits, const float* labels, unsigned long long* counts, int* bad,
                                 int nvox, int v, int c, int ignore)
{
    __shared__ unsigned int cnt[3 * VT_MAX_COUNT_CLASSES];
    const int slots = 3 * c * (nvox / v);
    const bool local = slots <= 3 * VT_MAX_COUNT_CLASSES;
    if (local) {
        for (int i = threadIdx.x; i < slots; i += VT_BLOCK) {
            cnt[i] = 0;
        }
    }
    __syncthreads();
    for (long long vox = vt_gid(); vox < nvox; vox += vt_gstride()) {
        const float lf = labels[vox];
        if (vt_ignored_byte(lf, ignore)) {
            continue;
        }
        const int bits = vt_bits(lf, c);
        if (bits < 0) {
            atomicMin(bad, (int)vox);
            continue;
        }
        const float* z = logits + vox * c;
        const int base = 3 * c * (int)(vox / v);
        for (int j = 0; j < c; j++) {
            const bool pred = z[j] > 0.0f;
            const bool t = vt_bit(bits, j);
            int slot = -1;
            if (pred && t) {
                slot = base + j;
            } else if (pred) {
                slot = base + c + j;
            } else if (t) {
                slot = base + 2 * c + j;
            }
            if (slot < 0) {
                continue;
            }
            if (local) {
                atomicAdd(&cnt[slot], 1u);
            } else {
                atomicAdd(&counts[slot], 1ull);
            }
        }
    }
    __syncthreads();
    if (local) {
        for (int i = threadIdx.x; i < slots; i += VT_BLOCK) {
            if (cnt[i] != 0) {
                atomicAdd(&counts[i], (unsigned long long)cnt[i]);
            }
        }
    }
}
