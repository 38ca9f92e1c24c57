// Code for package emu: the kernels of ../elementwise.cu, compiled for the host.
// Kept by hand: when a kernel is added to ../elementwise.cu, register it here
// (TestRegistryMatchesTable fails until it is).
#include "cuda_emu.h"

namespace vt_elementwise {
#include "../elementwise.cu"
} // namespace vt_elementwise

static const bool registered_elementwise = (
    cuda_emu::add("fill_f32", &vt_elementwise::fill_f32),
    cuda_emu::add("fill_i32", &vt_elementwise::fill_i32),
    cuda_emu::add("copy_f32", &vt_elementwise::copy_f32),
    cuda_emu::add("scale_f32", &vt_elementwise::scale_f32),
    cuda_emu::add("add_f32", &vt_elementwise::add_f32),
    cuda_emu::add("act_forward", &vt_elementwise::act_forward),
    cuda_emu::add("act_backward", &vt_elementwise::act_backward),
    cuda_emu::add("add_channel_bias", &vt_elementwise::add_channel_bias),
    cuda_emu::add("concat_channels", &vt_elementwise::concat_channels),
    cuda_emu::add("act_forward_bf16", &vt_elementwise::act_forward_bf16),
    cuda_emu::add("act_backward_bf16", &vt_elementwise::act_backward_bf16),
    cuda_emu::add("add_channel_bias_bf16", &vt_elementwise::add_channel_bias_bf16),
    cuda_emu::add("concat_channels_bf16", &vt_elementwise::concat_channels_bf16),
    cuda_emu::add("add_bf16", &vt_elementwise::add_bf16),
    cuda_emu::add("split_channels_bf16", &vt_elementwise::split_channels_bf16),
    cuda_emu::add("act_backward_bf16g", &vt_elementwise::act_backward_bf16g),
    cuda_emu::add("split_channels", &vt_elementwise::split_channels),
    cuda_emu::add("ncdhw_to_ndhwc", &vt_elementwise::ncdhw_to_ndhwc),
    cuda_emu::add("ndhwc_to_ncdhw", &vt_elementwise::ndhwc_to_ncdhw),
    cuda_emu::add("channel_affine_add", &vt_elementwise::channel_affine_add),
    cuda_emu::add("downsample_labels", &vt_elementwise::downsample_labels),
    cuda_emu::add("one_hot", &vt_elementwise::one_hot),
    cuda_emu::add("avg_pool", &vt_elementwise::avg_pool),
    cuda_emu::add("avg_pool_bf16", &vt_elementwise::avg_pool_bf16),
    cuda_emu::add("avg_pool_backward", &vt_elementwise::avg_pool_backward),
    cuda_emu::add("avg_pool_backward_bf16", &vt_elementwise::avg_pool_backward_bf16),
    true);
