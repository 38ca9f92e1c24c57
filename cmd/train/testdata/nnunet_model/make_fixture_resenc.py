#!/usr/bin/env python3
"""Make cmd/train/testdata/nnunet_model's residual-encoder model: a
trained-model folder as nnU-Net v2 writes one for its ResEnc M preset
(nnUNet_results/Dataset999_Tiny/nnUNetTrainer__nnUNetResEncUNetMPlans__3d_fullres),
for `train import-nnunet`'s ResEnc test, and what nnU-Net computes with it.

    python3 -m venv /tmp/tv && /tmp/tv/bin/pip install torch numpy nnunetv2
    /tmp/tv/bin/python cmd/train/testdata/nnunet_model/make_fixture_resenc.py

Made with torch 2.15.0, nnunetv2 2.8.1, dynamic-network-architectures 0.4.4
(the script prints the versions it runs with).

The plans are make_fixture.py's (transpose_forward [2, 0, 1]) with the
plans_name nnUNetPlannerResEncM gives its plans (nnUNetResEncUNetMPlans)
and 3d_fullres's architecture the ResidualEncoderUNet block as that
planner writes it: the same stages as make_fixture.py's network (3 stages,
features 4-8-16, kernels [1,3,3] [3,3,3] [3,3,3], strides [1,1,1] [1,2,2]
[2,2,2]), n_blocks_per_stage [1, 2, 2] (ResEnc M's 1, 3, 4, 6, ... cut
down for the small network: one block at full resolution, several blocks
deeper, the first of them strided with a pooled 1x1 projection skip),
n_conv_per_stage_decoder [1, 1] and conv_bias True. The network is
nnU-Net's own ResidualEncoderUNet, built by nnU-Net's get_network_from_plans
from these plans, PyTorch's initialisation (seed 11; nnU-Net's init zeroes
each block's conv2 norm) moved by 0.05 * N(0, 1) so that every norm, those
included, is neither 1 nor 0 and each residual branch counts, saved as
nnU-Net's save_checkpoint saves it in fold_0/checkpoint_final.pth.
ioresenc.npz holds an input (nnU-Net's transposed axes) and the network's
outputs on it (eval mode, every deep-supervision output). predictedresenc/
holds nnU-Net's own prediction of the demo case hippocampus_001 with this
model (nnUNetPredictor, no mirroring, CPU): hippocampus_001.nii.gz (its
labels) and hippocampus_001.npz (its probabilities).

The checkpoint's network_weights (the state_dict; ResidualEncoderUNet's
keys without the .all_modules. and decoder.encoder. duplicates), with the
shapes of this network (3 output classes):

    encoder.stem.convs.0.conv.{weight,bias}                   [4,1,1,3,3] [4]
    encoder.stem.convs.0.norm.{weight,bias}                   [4]
    encoder.stages.0.blocks.0.conv1.conv.{weight,bias}        [4,4,1,3,3] [4]
    encoder.stages.0.blocks.0.conv1.norm.{weight,bias}        [4]
    encoder.stages.0.blocks.0.conv2.conv.{weight,bias}        [4,4,1,3,3] [4]
    encoder.stages.0.blocks.0.conv2.norm.{weight,bias}        [4]
    encoder.stages.1.blocks.0.conv1.conv.{weight,bias}        [8,4,3,3,3] [8]  (stride [1,2,2])
    encoder.stages.1.blocks.0.conv1.norm.{weight,bias}        [8]
    encoder.stages.1.blocks.0.conv2.conv.{weight,bias}        [8,8,3,3,3] [8]
    encoder.stages.1.blocks.0.conv2.norm.{weight,bias}        [8]
    encoder.stages.1.blocks.0.skip.1.conv.weight              [8,4,1,1,1]  (skip.0: AvgPool [1,2,2])
    encoder.stages.1.blocks.0.skip.1.norm.{weight,bias}       [8]
    encoder.stages.1.blocks.1.conv{1,2}.conv.{weight,bias}    [8,8,3,3,3] [8]
    encoder.stages.1.blocks.1.conv{1,2}.norm.{weight,bias}    [8]
    encoder.stages.2.blocks.0.conv1.conv.{weight,bias}        [16,8,3,3,3] [16]  (stride [2,2,2])
    encoder.stages.2.blocks.0.conv1.norm.{weight,bias}        [16]
    encoder.stages.2.blocks.0.conv2.conv.{weight,bias}        [16,16,3,3,3] [16]
    encoder.stages.2.blocks.0.conv2.norm.{weight,bias}        [16]
    encoder.stages.2.blocks.0.skip.1.conv.weight              [16,8,1,1,1]  (skip.0: AvgPool [2,2,2])
    encoder.stages.2.blocks.0.skip.1.norm.{weight,bias}       [16]
    encoder.stages.2.blocks.1.conv{1,2}.conv.{weight,bias}    [16,16,3,3,3] [16]
    encoder.stages.2.blocks.1.conv{1,2}.norm.{weight,bias}    [16]
    decoder.stages.0.convs.0.conv.{weight,bias}               [8,16,3,3,3] [8]
    decoder.stages.0.convs.0.norm.{weight,bias}               [8]
    decoder.stages.1.convs.0.conv.{weight,bias}               [4,8,1,3,3] [4]
    decoder.stages.1.convs.0.norm.{weight,bias}               [4]
    decoder.transpconvs.0.{weight,bias}                       [16,8,2,2,2] [8]
    decoder.transpconvs.1.{weight,bias}                       [8,4,1,2,2] [4]
    decoder.seg_layers.0.{weight,bias}                        [3,8,1,1,1] [3]
    decoder.seg_layers.1.{weight,bias}                        [3,4,1,1,1] [3]

(the skip projections' 1x1 convs have no bias; every other conv has one).
The saved state_dict also holds PyTorch's duplicates of these, as nnU-Net's
does: <...>.all_modules.0/1 for each conv/norm and decoder.encoder.<...>
for the encoder, 224 keys in all.
"""
import copy
import json
import os
import shutil
from importlib.metadata import version

from make_fixture import make_network, predict, save_final

HERE = os.path.dirname(os.path.abspath(__file__))
FULL = os.path.join(HERE, "Dataset999_Tiny", "nnUNetTrainer__nnUNetPlans__3d_fullres")
MODEL = os.path.join(HERE, "Dataset999_Tiny", "nnUNetTrainer__nnUNetResEncUNetMPlans__3d_fullres")


def resenc_arch(plain):
    """nnUNetPlannerResEncM's architecture block for plain's stages."""
    k = plain["arch_kwargs"]
    n = k["n_stages"]
    return {
        "network_class_name": "dynamic_network_architectures.architectures.unet.ResidualEncoderUNet",
        "arch_kwargs": {
            "n_stages": n,
            "features_per_stage": k["features_per_stage"],
            "conv_op": k["conv_op"],
            "kernel_sizes": k["kernel_sizes"],
            "strides": k["strides"],
            "n_blocks_per_stage": [1, 2, 2] if n == 3 else ([1, 3, 4] + [4] * n)[:n],
            "n_conv_per_stage_decoder": [1] * (n - 1),
            "conv_bias": True,
            "norm_op": k["norm_op"],
            "norm_op_kwargs": {"eps": 1e-05, "affine": True},
            "dropout_op": None,
            "dropout_op_kwargs": None,
            "nonlin": "torch.nn.LeakyReLU",
            "nonlin_kwargs": {"inplace": True},
        },
        "_kw_requires_import": ["conv_op", "norm_op", "dropout_op", "nonlin"],
    }


def main():
    print("torch", version("torch"), "nnunetv2", version("nnunetv2"),
          "dynamic-network-architectures", version("dynamic_network_architectures"))
    os.makedirs(os.path.join(MODEL, "fold_0"), exist_ok=True)
    with open(os.path.join(FULL, "plans.json")) as f:
        plans = json.load(f)
    plans["plans_name"] = "nnUNetResEncUNetMPlans"
    plans["experiment_planner_used"] = "nnUNetPlannerResEncM"
    full = plans["configurations"]["3d_fullres"]
    arch = resenc_arch(full["architecture"])
    full["architecture"] = copy.deepcopy(arch)
    with open(os.path.join(MODEL, "plans.json"), "w") as f:
        json.dump(plans, f, indent=4)
    for name in ("dataset.json", "dataset_fingerprint.json"):
        shutil.copy(os.path.join(FULL, name), os.path.join(MODEL, name))
    with open(os.path.join(MODEL, "dataset.json")) as f:
        dataset = json.load(f)

    net = make_network(arch, 3, 11, (1, 1, 8, 16, 16), 12, os.path.join(HERE, "ioresenc.npz"))
    for k, v in net.state_dict().items():
        if ".all_modules." not in k and not k.startswith("decoder.encoder."):
            print(k, list(v.shape))
    save_final(net, plans, dataset, "3d_fullres", (0, 1, 2), os.path.join(MODEL, "fold_0", "checkpoint_final.pth"))


if __name__ == "__main__":
    main()
    predict(MODEL, os.path.join(HERE, "predictedresenc"))
