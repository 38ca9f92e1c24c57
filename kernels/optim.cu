// optim.cu — optimiser updates with PyTorch's semantics, one thread per
// parameter element, written as package cpu writes them so the updates are
// bit-identical to the CPU device's (PTX built with -fmad=false).
//
// Launch (both): 1-D blocks of VT_BLOCK threads, 1-D grid-stride grid,
// work n, no shared memory. The gradient-norm clipping factor is folded in
// as grad_scale (the sum of squares is sumsq_partial in reduce.cu).
#include "common.cuh"

// sgd_update: SGD with momentum, Nesterov and weight decay (dampening 0):
//
//   d   = grad_scale·g + wd·w          (the wd term only when wd != 0)
//   buf = momentum·buf + d             (only when buf != null)
//   d   = d + momentum·buf  (nesterov != 0)   or   d = buf
//   w  -= lr·d
//
// buf may be null when momentum is 0.
__device__ inline void vt_sgd_elem(float* w, const float* g, float* buf, long long i,
                                   float lr, float momentum, float wd, int nesterov, float grad_scale)
{
    float dp = g[i] * grad_scale;
    if (wd != 0.0f) {
        dp += wd * w[i];
    }
    if (buf != nullptr) {
        const float b = momentum * buf[i] + dp;
        buf[i] = b;
        if (nesterov != 0) {
            dp += momentum * b;
        } else {
            dp = b;
        }
    }
    w[i] -= lr * dp;
}

VT_KERNEL sgd_update(float* w, const float* g, float* buf, int n,
                     float lr, float momentum, float wd, int nesterov, float grad_scale)
{
    for (long long i = vt_gid(); i < n; i += vt_gstride()) {
        vt_sgd_elem(w, g, buf, i, lr, momentum, wd, nesterov, grad_scale);
    }
}

// adamw_update: one AdamW step (PyTorch, amsgrad off):
//
//   g' = grad_scale·g
//   m  = beta1·m + (1-beta1)·g'
//   v  = beta2·v + (1-beta2)·g'²
//   w  = w·decay - step_size·m / (sqrt(v)/bc2_sqrt + eps)
//
// with the host-computed decay = 1 - lr·wd, step_size = lr/(1 - beta1^t)
// and bc2_sqrt = sqrt(1 - beta2^t) (kernels.AdamWScalars).
__device__ inline void vt_adamw_elem(float* w, const float* g, float* m, float* v, long long i,
                                     float beta1, float beta2, float eps, float step_size, float bc2_sqrt,
                                     float decay, float grad_scale)
{
    const float gi = g[i] * grad_scale;
    const float wi = w[i] * decay;
    const float mi = beta1 * m[i] + (1.0f - beta1) * gi;
    const float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float denom = sqrtf(vi) / bc2_sqrt + eps;
    w[i] = wi - step_size * mi / denom;
}

VT_KERNEL adamw_update(float* w, const float* g, float* m, float* v, int n,
                       float beta1, float beta2, float eps, float step_size, float bc2_sqrt, float decay,
                       float grad_scale)
{
    for (long long i = vt_gid(); i < n; i += vt_gstride()) {
        vt_adamw_elem(w, g, m, v, i, beta1, beta2, eps, step_size, bc2_sqrt, decay, grad_scale);
    }
}

// The tensor-list twins (PyTorch's multi-tensor apply): one launch updates
// every parameter. A list (kernels.TensorList) is
//
//   ptrs[t*k + j]   the device address of operand j of tensor t (k operands:
//                   sgd w, g, buf (0 without momentum); adamw w, g, m, v)
//   sizes[t]        tensor t's elements
//   chunks[2*q]     the tensor of chunk q, chunks[2*q+1] its first element;
//                   a chunk is `chunk` elements (fewer at a tensor's end)
//
// Launch: 1-D blocks of VT_BLOCK threads, one block per chunk, min(nchunks,
// MaxGrid) blocks striding over the chunks; no shared memory. Each element
// is updated by the same arithmetic as the one-tensor kernels above, so the
// results are bit-identical to a launch per tensor.
VT_KERNEL sgd_update_list(const unsigned long long* ptrs, const int* sizes, const int* chunks, int nchunks,
                          int chunk, float lr, float momentum, float wd, int nesterov, float grad_scale)
{
    for (int q = blockIdx.x; q < nchunks; q += gridDim.x) {
        long long lo, hi;
        const int t = vt_list_chunk(sizes, chunks, q, chunk, &lo, &hi);
        float* w = (float*)ptrs[3 * t];
        const float* g = (const float*)ptrs[3 * t + 1];
        float* buf = (float*)ptrs[3 * t + 2];
        for (long long i = lo + threadIdx.x; i < hi; i += VT_BLOCK) {
            vt_sgd_elem(w, g, buf, i, lr, momentum, wd, nesterov, grad_scale);
        }
    }
}

VT_KERNEL adamw_update_list(const unsigned long long* ptrs, const int* sizes, const int* chunks, int nchunks,
                            int chunk, float beta1, float beta2, float eps, float step_size, float bc2_sqrt,
                            float decay, float grad_scale)
{
    for (int q = blockIdx.x; q < nchunks; q += gridDim.x) {
        long long lo, hi;
        const int t = vt_list_chunk(sizes, chunks, q, chunk, &lo, &hi);
        float* w = (float*)ptrs[4 * t];
        const float* g = (const float*)ptrs[4 * t + 1];
        float* m = (float*)ptrs[4 * t + 2];
        float* v = (float*)ptrs[4 * t + 3];
        for (long long i = lo + threadIdx.x; i < hi; i += VT_BLOCK) {
            vt_adamw_elem(w, g, m, v, i, beta1, beta2, eps, step_size, bc2_sqrt, decay, grad_scale);
        }
    }
}
