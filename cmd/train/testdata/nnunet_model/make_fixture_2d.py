#!/usr/bin/env python3
"""Make cmd/train/testdata/nnunet_model's 2-D model: a trained-model folder
as nnU-Net v2 writes one for a 2d configuration
(nnUNet_results/Dataset999_Tiny/nnUNetTrainer__nnUNetPlans__2d), for
`train import-nnunet`'s 2-D test, and what nnU-Net computes with it.

    python3 -m venv /tmp/tv && /tmp/tv/bin/pip install torch numpy nnunetv2
    /tmp/tv/bin/python cmd/train/testdata/nnunet_model/make_fixture_2d.py

The plans are make_fixture.py's (transpose_forward [2, 0, 1]: nnU-Net slices
the files' W axis) with a 2d configuration whose in-plane spacing, 1.25 x 0.8
over the files' (D, H), is not the demo case's 1 x 1, so that predicting
resamples in-plane while the slicing axis keeps each case's own spacing
(nnU-Net's DefaultPreprocessor: "in 2d configuration we do not change the
spacing between slices"), where the 3d_fullres spacing across slices is
3.0. The network is nnU-Net's own PlainConvUNet with 2-D convolutions
(features 4-8-16), PyTorch's initialisation (seed 6) moved by
0.05 * N(0, 1), saved as nnU-Net's save_checkpoint saves it.
io2d.npz holds a 2-D input (one slice in nnU-Net's transposed axes) and
the network's outputs on it (eval mode, every deep-supervision output).
predicted2d/ holds nnU-Net's own prediction of the demo case
hippocampus_001 with this model (nnUNetPredictor, no mirroring, CPU).
"""
import copy
import json
import os
import shutil

from make_fixture import make_network, predict, save_final

HERE = os.path.dirname(os.path.abspath(__file__))
FULL = os.path.join(HERE, "Dataset999_Tiny", "nnUNetTrainer__nnUNetPlans__3d_fullres")
MODEL = os.path.join(HERE, "Dataset999_Tiny", "nnUNetTrainer__nnUNetPlans__2d")

ARCH = {
    "network_class_name": "dynamic_network_architectures.architectures.unet.PlainConvUNet",
    "arch_kwargs": {
        "n_stages": 3,
        "features_per_stage": [4, 8, 16],
        "conv_op": "torch.nn.modules.conv.Conv2d",
        "kernel_sizes": [[3, 3], [3, 3], [3, 3]],
        "strides": [[1, 1], [2, 2], [2, 2]],
        "n_conv_per_stage": [2, 2, 2],
        "n_conv_per_stage_decoder": [2, 2],
        "conv_bias": True,
        "norm_op": "torch.nn.modules.instancenorm.InstanceNorm2d",
        "norm_op_kwargs": {"eps": 1e-05, "affine": True},
        "dropout_op": None,
        "dropout_op_kwargs": None,
        "nonlin": "torch.nn.LeakyReLU",
        "nonlin_kwargs": {"inplace": True},
    },
    "_kw_requires_import": ["conv_op", "norm_op", "dropout_op", "nonlin"],
}


def main():
    os.makedirs(os.path.join(MODEL, "fold_0"), exist_ok=True)
    with open(os.path.join(FULL, "plans.json")) as f:
        plans = json.load(f)
    c2 = copy.deepcopy(plans["configurations"]["3d_fullres"])
    c2.update({
        "data_identifier": "nnUNetPlans_2d",
        "batch_size": 12,
        "patch_size": [16, 16],
        "median_image_size_in_voxels": [24.0, 24.0],
        "spacing": [1.25, 0.8],
        "architecture": ARCH,
    })
    plans["configurations"]["2d"] = c2
    with open(os.path.join(MODEL, "plans.json"), "w") as f:
        json.dump(plans, f, indent=4)
    for name in ("dataset.json", "dataset_fingerprint.json"):
        shutil.copy(os.path.join(FULL, name), os.path.join(MODEL, name))
    with open(os.path.join(MODEL, "dataset.json")) as f:
        dataset = json.load(f)

    net = make_network(ARCH, 3, 6, (1, 1, 16, 16), 8, os.path.join(HERE, "io2d.npz"))
    save_final(net, plans, dataset, "2d", (0, 1), os.path.join(MODEL, "fold_0", "checkpoint_final.pth"))

if __name__ == "__main__":
    main()
    predict(MODEL, os.path.join(HERE, "predicted2d"))
