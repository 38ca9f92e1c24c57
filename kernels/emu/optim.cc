// Code for package emu: the kernels of ../optim.cu, compiled for the host.
// Kept by hand: when a kernel is added to ../optim.cu, register it here
// (TestRegistryMatchesTable fails until it is).
#include "cuda_emu.h"

namespace vt_optim {
#include "../optim.cu"
} // namespace vt_optim

static const bool registered_optim = (
    cuda_emu::add("sgd_update", &vt_optim::sgd_update),
    cuda_emu::add("adamw_update", &vt_optim::adamw_update),
    cuda_emu::add("sgd_update_list", &vt_optim::sgd_update_list),
    cuda_emu::add("adamw_update_list", &vt_optim::adamw_update_list),
    true);
