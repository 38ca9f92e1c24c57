// Code for package emu: the kernels of ../cast.cu, compiled for the host.
// Kept by hand: when a kernel is added to ../cast.cu, register it here
// (TestRegistryMatchesTable fails until it is).
#include "cuda_emu.h"

namespace vt_cast {
#include "../cast.cu"
} // namespace vt_cast

static const bool registered_cast = (
    cuda_emu::add("f32_to_bf16", &vt_cast::f32_to_bf16),
    cuda_emu::add("bf16_to_f32", &vt_cast::bf16_to_f32),
    true);
