// cast.cu — float32 <-> bfloat16 conversions (bf16 stored as the upper 16
// bits of the float32 pattern, in unsigned short), for mixed-precision
// weights and activations.
//
// Launch (both): 1-D blocks of VT_BLOCK threads, 1-D grid-stride grid,
// work n, no shared memory.
#include "common.cuh"

// f32_to_bf16 rounds to nearest, ties to even; infinities stay infinite,
// values beyond bf16's range round to infinity, and NaNs stay NaN (quieted,
// sign and upper payload kept).
VT_KERNEL f32_to_bf16(const float* src, unsigned short* dst, int n)
{
    for (long long i = vt_gid(); i < n; i += vt_gstride()) {
        dst[i] = vt_bf16(src[i]);
    }
}

// bf16_to_f32 is exact: the bf16 bits become the upper half of the float.
VT_KERNEL bf16_to_f32(const unsigned short* src, float* dst, int n)
{
    for (long long i = vt_gid(); i < n; i += vt_gstride()) {
        dst[i] = __uint_as_float((unsigned int)src[i] << 16);
    }
}
