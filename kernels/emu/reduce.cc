// Code for package emu: the kernels of ../reduce.cu, compiled for the host.
// Kept by hand: when a kernel is added to ../reduce.cu, register it here
// (TestRegistryMatchesTable fails until it is).
#include "cuda_emu.h"

namespace vt_reduce {
#include "../reduce.cu"
} // namespace vt_reduce

static const bool registered_reduce = (
    cuda_emu::add("channel_sum_partial", &vt_reduce::channel_sum_partial),
    cuda_emu::add("sumsq_partial", &vt_reduce::sumsq_partial),
    cuda_emu::add("reduce_chunks_f64", &vt_reduce::reduce_chunks_f64),
    cuda_emu::add("reduce_chunks_f32", &vt_reduce::reduce_chunks_f32),
    cuda_emu::add("channel_sum_partial_bf16", &vt_reduce::channel_sum_partial_bf16),
    cuda_emu::add("sumsq_partial_list", &vt_reduce::sumsq_partial_list),
    cuda_emu::add("reduce_ranges_f64", &vt_reduce::reduce_ranges_f64),
    true);
