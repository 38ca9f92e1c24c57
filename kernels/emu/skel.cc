// Code for package emu: the kernels of ../skel.cu, compiled for the host.
// Kept by hand: when a kernel is added to ../skel.cu, register it here
// (TestRegistryMatchesTable fails until it is).
#include "cuda_emu.h"

namespace vt_skel {
#include "../skel.cu"
} // namespace vt_skel

static const bool registered_skel = (
    cuda_emu::add("skel_erode", &vt_skel::skel_erode),
    cuda_emu::add("skel_dilate", &vt_skel::skel_dilate),
    cuda_emu::add("skel_init", &vt_skel::skel_init),
    cuda_emu::add("skel_step", &vt_skel::skel_step),
    cuda_emu::add("skel_bwd_step", &vt_skel::skel_bwd_step),
    cuda_emu::add("skel_dilate_bwd", &vt_skel::skel_dilate_bwd),
    cuda_emu::add("skel_erode_bwd", &vt_skel::skel_erode_bwd),
    cuda_emu::add("skel_accum", &vt_skel::skel_accum),
    true);
