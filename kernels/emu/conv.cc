// Code for package emu: the kernels of ../conv.cu, compiled for the host.
// Kept by hand: when a kernel is added to ../conv.cu, register it here
// (TestRegistryMatchesTable fails until it is).
#include "cuda_emu.h"

namespace vt_conv {
#include "../conv.cu"
} // namespace vt_conv

static const bool registered_conv = (
    cuda_emu::add("vol2col", &vt_conv::vol2col),
    cuda_emu::add("col2vol", &vt_conv::col2vol),
    cuda_emu::add("vol2col_bf16", &vt_conv::vol2col_bf16),
    cuda_emu::add("vol2col_bf16x", &vt_conv::vol2col_bf16x),
    cuda_emu::add("col2vol_bf16", &vt_conv::col2vol_bf16),
    true);
