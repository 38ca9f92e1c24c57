// Code for package emu: the kernels of ../loss.cu, compiled for the host.
// Kept by hand: when a kernel is added to ../loss.cu, register it here
// (TestRegistryMatchesTable fails until it is).
#include "cuda_emu.h"

namespace vt_loss {
#include "../loss.cu"
} // namespace vt_loss

static const bool registered_loss = (
    cuda_emu::add("softmax", &vt_loss::softmax),
    cuda_emu::add("softmax_fwd", &vt_loss::softmax_fwd),
    cuda_emu::add("seg_stats_partial", &vt_loss::seg_stats_partial),
    cuda_emu::add("softmax_loss_bwd", &vt_loss::softmax_loss_bwd),
    cuda_emu::add("sigmoid_bce", &vt_loss::sigmoid_bce),
    cuda_emu::add("seg_counts", &vt_loss::seg_counts),
    cuda_emu::add("sigmoid_multi_label_loss", &vt_loss::sigmoid_multi_label_loss),
    cuda_emu::add("sigmoid_multi_label_loss_bwd", &vt_loss::sigmoid_multi_label_loss_bwd),
    cuda_emu::add("seg_counts_multi_label", &vt_loss::seg_counts_multi_label),
    true);
