#!/usr/bin/env python3
"""Generate the PyTorch reference fixture of nnU-Net's residual-encoder U-Net.

The network is `ResidualEncoderUNet` (dynamic_network_architectures.
architectures.unet), the one nnU-Net's ResEnc presets (nnUNetResEncUNet{M,L,XL}
Plans) build. Run it from a scratch virtualenv outside the repository:

    python3 -m venv /tmp/resenc-venv
    /tmp/resenc-venv/bin/pip install torch dynamic-network-architectures numpy
    /tmp/resenc-venv/bin/python nn/testdata/make_resenc_fixture.py

Versions used: torch 2.15.0 (CPU execution), dynamic-network-architectures
0.4.4, numpy 2.4.6, Python 3.11.7. The constructor's argument names are the
ones below; nothing had to be adapted. In-place LeakyReLU (as nnU-Net uses
it) works with autograd here, so it is kept.

It writes, next to itself, resenc.safetensors (about 317 KiB, 244 tensors,
float32 throughout, integer-valued ones included, with
python/voxtrain_torch.py's save_safetensors, so no safetensors package is
needed). Two cases, tensor names prefixed `a.` and `b.`:

  a  ResidualEncoderUNet(input_channels=1, n_stages=3, features 4-8-8,
     Conv3d, kernels 3x3x3, strides 1-2-2, n_blocks_per_stage 1-2-2,
     num_classes=3, n_conv_per_stage_decoder 1-1, conv_bias=True,
     InstanceNorm3d(eps 1e-5, affine), LeakyReLU(0.01, inplace),
     deep_supervision=True); input 2x1x8x8x8; torch.manual_seed(0),
     generator seed 0.
  b  ResidualEncoderUNet(input_channels=2, n_stages=3, features 4-6-8,
     kernels 1x3x3 then 3x3x3 twice, strides 1-1-(1,2,2), n_blocks_per_stage
     2-1-2, num_classes=2, n_conv_per_stage_decoder 2-2, conv_bias=False,
     same norm and nonlinearity, deep_supervision=False); input 2x2x6x8x8;
     torch.manual_seed(1), generator seed 1.

For each case, in model.train() mode, everything drawn in this order from a
torch.Generator seeded per case:
  <case>.init.<key>   every parameter, drawn in state_dict order: conv and
                      transposed-conv weights randn * sqrt(2 / fan_in) with
                      fan_in = weight.shape[1] * prod(kernel) (for a
                      transposed conv, shape[1] is its output channels),
                      biases randn * 0.1, instance-norm weights 1 + 0.1 randn,
                      instance-norm biases 0.1 randn.
  <case>.input        randn, NCDHW.
  <case>.logits.<i>   the network's outputs, highest resolution first (deep
                      supervision: one per decoder stage; without: one).
  <case>.dlogits.<i>  R_i = randn of logits i's shape; the loss is
                      sum_i (logits_i * R_i).sum(), so R_i is its gradient.
  <case>.loss         that loss, shape (1,).
  <case>.grad.<key>   d loss / d parameter after loss.backward(). A
                      parameter that takes no part in the forward (in case b,
                      decoder.seg_layers.0.*, since without deep supervision
                      only the last seg layer runs) has no gradient in
                      PyTorch; it is stored as zeros. Conv biases right before
                      an instance norm get gradients of ~0 (rounding only).

Layouts are PyTorch's: activations NCDHW, conv weights (O, I, kd, kh, kw),
transposed-conv weights (I, O, kd, kh, kw).

Keys are model.state_dict()'s minus duplicates: every ConvDropoutNormReLU
registers its conv and norm twice (as .conv/.norm and inside .all_modules),
and the decoder holds the encoder (decoder.encoder.*), so keys containing
`.all_modules.` and keys starting with `decoder.encoder.` are dropped. The
model has no buffers (InstanceNorm3d without running stats). The order is
state_dict order (note decoder.stages before decoder.transpconvs, the order
UNetDecoder registers them). Case a's keys:

  encoder.stem.convs.0.conv.weight             (4, 1, 3, 3, 3)
  encoder.stem.convs.0.conv.bias               (4,)
  encoder.stem.convs.0.norm.weight             (4,)
  encoder.stem.convs.0.norm.bias               (4,)
  encoder.stages.0.blocks.0.conv1.conv.weight  (4, 4, 3, 3, 3)
  encoder.stages.0.blocks.0.conv1.conv.bias    (4,)
  encoder.stages.0.blocks.0.conv1.norm.weight  (4,)
  encoder.stages.0.blocks.0.conv1.norm.bias    (4,)
  encoder.stages.0.blocks.0.conv2.conv.weight  (4, 4, 3, 3, 3)
  encoder.stages.0.blocks.0.conv2.conv.bias    (4,)
  encoder.stages.0.blocks.0.conv2.norm.weight  (4,)
  encoder.stages.0.blocks.0.conv2.norm.bias    (4,)
  encoder.stages.1.blocks.0.conv1.conv.weight  (8, 4, 3, 3, 3)
  encoder.stages.1.blocks.0.conv1.conv.bias    (8,)
  encoder.stages.1.blocks.0.conv1.norm.weight  (8,)
  encoder.stages.1.blocks.0.conv1.norm.bias    (8,)
  encoder.stages.1.blocks.0.conv2.conv.weight  (8, 8, 3, 3, 3)
  encoder.stages.1.blocks.0.conv2.conv.bias    (8,)
  encoder.stages.1.blocks.0.conv2.norm.weight  (8,)
  encoder.stages.1.blocks.0.conv2.norm.bias    (8,)
  encoder.stages.1.blocks.0.skip.1.conv.weight (8, 4, 1, 1, 1)
  encoder.stages.1.blocks.0.skip.1.norm.weight (8,)
  encoder.stages.1.blocks.0.skip.1.norm.bias   (8,)
  encoder.stages.1.blocks.1.conv1.conv.weight  (8, 8, 3, 3, 3)
  encoder.stages.1.blocks.1.conv1.conv.bias    (8,)
  encoder.stages.1.blocks.1.conv1.norm.weight  (8,)
  encoder.stages.1.blocks.1.conv1.norm.bias    (8,)
  encoder.stages.1.blocks.1.conv2.conv.weight  (8, 8, 3, 3, 3)
  encoder.stages.1.blocks.1.conv2.conv.bias    (8,)
  encoder.stages.1.blocks.1.conv2.norm.weight  (8,)
  encoder.stages.1.blocks.1.conv2.norm.bias    (8,)
  encoder.stages.2.blocks.0.conv1.conv.weight  (8, 8, 3, 3, 3)
  encoder.stages.2.blocks.0.conv1.conv.bias    (8,)
  encoder.stages.2.blocks.0.conv1.norm.weight  (8,)
  encoder.stages.2.blocks.0.conv1.norm.bias    (8,)
  encoder.stages.2.blocks.0.conv2.conv.weight  (8, 8, 3, 3, 3)
  encoder.stages.2.blocks.0.conv2.conv.bias    (8,)
  encoder.stages.2.blocks.0.conv2.norm.weight  (8,)
  encoder.stages.2.blocks.0.conv2.norm.bias    (8,)
  encoder.stages.2.blocks.1.conv1.conv.weight  (8, 8, 3, 3, 3)
  encoder.stages.2.blocks.1.conv1.conv.bias    (8,)
  encoder.stages.2.blocks.1.conv1.norm.weight  (8,)
  encoder.stages.2.blocks.1.conv1.norm.bias    (8,)
  encoder.stages.2.blocks.1.conv2.conv.weight  (8, 8, 3, 3, 3)
  encoder.stages.2.blocks.1.conv2.conv.bias    (8,)
  encoder.stages.2.blocks.1.conv2.norm.weight  (8,)
  encoder.stages.2.blocks.1.conv2.norm.bias    (8,)
  decoder.stages.0.convs.0.conv.weight         (8, 16, 3, 3, 3)
  decoder.stages.0.convs.0.conv.bias           (8,)
  decoder.stages.0.convs.0.norm.weight         (8,)
  decoder.stages.0.convs.0.norm.bias           (8,)
  decoder.stages.1.convs.0.conv.weight         (4, 8, 3, 3, 3)
  decoder.stages.1.convs.0.conv.bias           (4,)
  decoder.stages.1.convs.0.norm.weight         (4,)
  decoder.stages.1.convs.0.norm.bias           (4,)
  decoder.transpconvs.0.weight                 (8, 8, 2, 2, 2)
  decoder.transpconvs.0.bias                   (8,)
  decoder.transpconvs.1.weight                 (8, 4, 2, 2, 2)
  decoder.transpconvs.1.bias                   (4,)
  decoder.seg_layers.0.weight                  (3, 8, 1, 1, 1)
  decoder.seg_layers.0.bias                    (3,)
  decoder.seg_layers.1.weight                  (3, 4, 1, 1, 1)
  decoder.seg_layers.1.bias                    (3,)

Architecture, as dynamic_network_architectures 0.4.4 builds it:
  - Every conv pads (k - 1) // 2 per axis ("same" for odd kernels).
  - encoder.stem: StackedConvBlocks with one ConvDropoutNormReLU (conv
    kernel_sizes[0], stride 1, bias=conv_bias -> InstanceNorm -> LeakyReLU),
    input_channels -> features[0], so stage 0's first block sees
    features[0] channels (no skip projection unless strides[0] != 1). Then encoder.stages.s is a
    StackedResidualBlocks of n_blocks_per_stage[s] BasicBlockD; only block 0
    has the stage's stride (pool_type 'conv': strided convs, no pooling op).
  - BasicBlockD.forward: out = conv2(conv1(x)) + skip(x); return nonlin2(out).
    conv1 = conv(k, stride, bias=conv_bias) -> norm -> LeakyReLU;
    conv2 = conv(k, stride 1, bias=conv_bias) -> norm, NO nonlinearity; the
    LeakyReLU (nonlin2, no parameters) comes after the addition.
  - skip: identity unless the block strides or changes channels; else
    nn.Sequential of [AvgPool3d(kernel=stride, stride=stride)] if strided,
    then [ConvDropoutNormReLU(1x1x1, stride 1, bias=False always, norm, no
    nonlinearity)] if channels change. So the projection's index is
    skip.1 after a pool and skip.0 without one.
  - decoder (UNetDecoder), stage s = 0.. from the bottleneck up:
    transpconvs.s = ConvTranspose3d(f_below, f_skip, kernel=stride,
    stride=stride, bias=conv_bias) (a 1x1x1 transposed conv for a stride-1
    stage, as in case b); cat((up, skip), dim=1) (upsampled first);
    stages.s = StackedConvBlocks(n_conv_per_stage_decoder[s],
    2*f_skip -> f_skip, kernel of the skip's stage, stride 1, conv ->
    norm -> LeakyReLU each); seg_layers.s = Conv3d(f_skip, num_classes,
    1x1x1, bias=True always), applied to the stage's output, no
    nonlinearity after it. seg_layers are built for every stage even without
    deep supervision.
  - nnU-Net initialises with InitWeights_He(1e-2) plus
    init_last_bn_before_add_to_0 (conv2's norm weight and bias zeroed);
    ResidualEncoderUNet's constructor does not apply either, and this fixture
    overwrites everything anyway.
"""
import math
import sys
from pathlib import Path

import torch
import torch.nn as nn
from dynamic_network_architectures.architectures.unet import ResidualEncoderUNet

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "python"))
from voxtrain_torch import save_safetensors  # noqa: E402

NORM = {"eps": 1e-5, "affine": True}
LRELU = {"negative_slope": 0.01, "inplace": True}


def build_a():
    return ResidualEncoderUNet(
        input_channels=1, n_stages=3, features_per_stage=[4, 8, 8], conv_op=nn.Conv3d,
        kernel_sizes=[[3, 3, 3]] * 3, strides=[[1, 1, 1], [2, 2, 2], [2, 2, 2]],
        n_blocks_per_stage=[1, 2, 2], num_classes=3, n_conv_per_stage_decoder=[1, 1],
        conv_bias=True, norm_op=nn.InstanceNorm3d, norm_op_kwargs=dict(NORM),
        dropout_op=None, dropout_op_kwargs=None, nonlin=nn.LeakyReLU,
        nonlin_kwargs=dict(LRELU), deep_supervision=True)


def build_b():
    return ResidualEncoderUNet(
        input_channels=2, n_stages=3, features_per_stage=[4, 6, 8], conv_op=nn.Conv3d,
        kernel_sizes=[[1, 3, 3], [3, 3, 3], [3, 3, 3]],
        strides=[[1, 1, 1], [1, 1, 1], [1, 2, 2]],
        n_blocks_per_stage=[2, 1, 2], num_classes=2, n_conv_per_stage_decoder=[2, 2],
        conv_bias=False, norm_op=nn.InstanceNorm3d, norm_op_kwargs=dict(NORM),
        nonlin=nn.LeakyReLU, nonlin_kwargs=dict(LRELU), deep_supervision=False)


def kept_keys(model):
    return [k for k in model.state_dict().keys()
            if ".all_modules." not in k and not k.startswith("decoder.encoder.")]


def init_params(model, keys, g):
    params = dict(model.named_parameters(remove_duplicate=False))
    with torch.no_grad():
        for k in keys:
            mod_name, pname = k.rsplit(".", 1)
            m = model.get_submodule(mod_name)
            p = params[k]
            if isinstance(m, (nn.Conv3d, nn.ConvTranspose3d)):
                if pname == "weight":
                    fan_in = p.shape[1] * math.prod(p.shape[2:])
                    p.copy_(torch.randn(p.shape, generator=g) * math.sqrt(2.0 / fan_in))
                else:
                    p.copy_(torch.randn(p.shape, generator=g) * 0.1)
            elif isinstance(m, nn.InstanceNorm3d):
                if pname == "weight":
                    p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
                else:
                    p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                raise RuntimeError(f"unexpected parameter {k} of {type(m).__name__}")


def run_case(prefix, build, seed, in_shape, out):
    torch.manual_seed(seed)
    model = build()
    model.train()
    sd = model.state_dict()
    assert all(isinstance(v, torch.Tensor) for v in sd.values())
    assert not list(model.buffers()), "unexpected buffers"
    keys = kept_keys(model)
    # The kept keys must cover every parameter exactly once.
    params = dict(model.named_parameters(remove_duplicate=False))
    assert set(keys) <= set(params), "a kept key is not a parameter"
    kept_ids = [id(params[k]) for k in keys]
    assert len(set(kept_ids)) == len(kept_ids)
    assert set(kept_ids) == {id(p) for p in model.parameters()}

    print(f"case {prefix}: {len(keys)} kept state_dict keys")
    for k in keys:
        print(f"  {k} {tuple(sd[k].shape)}")

    g = torch.Generator().manual_seed(seed)
    init_params(model, keys, g)
    for k in keys:
        out[f"{prefix}.init.{k}"] = params[k].detach().clone()

    x = torch.randn(in_shape, generator=g)
    out[f"{prefix}.input"] = x.clone()

    outputs = model(x)
    if isinstance(outputs, torch.Tensor):
        outputs = [outputs]
    loss = torch.zeros(())
    for i, o in enumerate(outputs):
        r = torch.randn(o.shape, generator=g)
        out[f"{prefix}.logits.{i}"] = o.detach().clone()
        out[f"{prefix}.dlogits.{i}"] = r
        loss = loss + (o * r).sum()
        print(f"  logits.{i} {tuple(o.shape)}")
    loss.backward()
    out[f"{prefix}.loss"] = loss.detach().reshape(1)
    print(f"  loss {loss.item():.6f}")
    for k in keys:
        gr = params[k].grad
        if gr is None:
            print(f"  no gradient (unused): {k}; stored as zeros")
            gr = torch.zeros_like(params[k])
        out[f"{prefix}.grad.{k}"] = gr.detach().clone()


def main():
    torch.set_default_dtype(torch.float32)
    out = {}
    run_case("a", build_a, 0, (2, 1, 8, 8, 8), out)
    run_case("b", build_b, 1, (2, 2, 6, 8, 8), out)
    path = HERE / "resenc.safetensors"
    save_safetensors(str(path), out)
    print(f"wrote {path} ({path.stat().st_size} bytes, {len(out)} tensors)")


if __name__ == "__main__":
    main()
