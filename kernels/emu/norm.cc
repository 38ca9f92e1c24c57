// Code for package emu: the kernels of ../norm.cu, compiled for the host.
// Kept by hand: when a kernel is added to ../norm.cu, register it here
// (TestRegistryMatchesTable fails until it is).
#include "cuda_emu.h"

namespace vt_norm {
#include "../norm.cu"
} // namespace vt_norm

static const bool registered_norm = (
    cuda_emu::add("instnorm_fwd_partial", &vt_norm::instnorm_fwd_partial),
    cuda_emu::add("instnorm_fwd_stats", &vt_norm::instnorm_fwd_stats),
    cuda_emu::add("instnorm_fwd_apply", &vt_norm::instnorm_fwd_apply),
    cuda_emu::add("instnorm_bwd_partial", &vt_norm::instnorm_bwd_partial),
    cuda_emu::add("instnorm_bwd_finish", &vt_norm::instnorm_bwd_finish),
    cuda_emu::add("instnorm_bwd_affine", &vt_norm::instnorm_bwd_affine),
    cuda_emu::add("instnorm_bwd_apply", &vt_norm::instnorm_bwd_apply),
    cuda_emu::add("instnorm_fwd_partial_bf16", &vt_norm::instnorm_fwd_partial_bf16),
    cuda_emu::add("instnorm_fwd_apply_bf16", &vt_norm::instnorm_fwd_apply_bf16),
    cuda_emu::add("instnorm_bwd_partial_bf16", &vt_norm::instnorm_bwd_partial_bf16),
    cuda_emu::add("instnorm_bwd_apply_bf16", &vt_norm::instnorm_bwd_apply_bf16),
    cuda_emu::add("instnorm_bwd_partial_bf16g", &vt_norm::instnorm_bwd_partial_bf16g),
    cuda_emu::add("instnorm_bwd_apply_bf16g", &vt_norm::instnorm_bwd_apply_bf16g),
    true);
