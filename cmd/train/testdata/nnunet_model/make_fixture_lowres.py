#!/usr/bin/env python3
"""Make cmd/train/testdata/nnunet_model's 3d_lowres model: a trained-model
folder as nnU-Net v2 writes one for the first stage of its cascade
(nnUNet_results/Dataset999_Tiny/nnUNetTrainer__nnUNetPlans__3d_lowres), for
`train import-nnunet`'s 3d_lowres test, and what nnU-Net computes with it.

    python3 -m venv /tmp/tv && /tmp/tv/bin/pip install torch numpy nnunetv2
    /tmp/tv/bin/python cmd/train/testdata/nnunet_model/make_fixture_lowres.py

The plans are make_fixture.py's (transpose_forward [2, 0, 1]) with the two
configurations nnU-Net's planner adds for large images: 3d_lowres, a 3-D
network on a coarser grid (spacing 3.6 x 1.25 x 1.5 in nnU-Net's transposed
axes, where 3d_fullres has 3 x 1 x 1; every axis coarser, by different
factors, anisotropy below nnU-Net's separate-z threshold of 3) whose
next_stage is 3d_cascade_fullres, and that cascade stage (inherits_from
3d_fullres, previous_stage 3d_lowres), which voxtrain refuses. The network
is nnU-Net's own PlainConvUNet (features 4-8-16), PyTorch's initialisation
(seed 9) moved by 0.05 * N(0, 1), saved as nnU-Net's save_checkpoint saves
it. iolowres.npz holds an input (nnU-Net's transposed axes) and the
network's outputs on it (eval mode, every deep-supervision output).
predictedlowres/ holds nnU-Net's own prediction of the demo case
hippocampus_001 with this model (nnUNetPredictor, no mirroring, CPU): the
case resampled to the low-resolution grid, predicted there, and its
probabilities resampled back to the file's grid.
"""
import copy
import json
import os
import shutil

from make_fixture import ARCH, make_network, predict, save_final

HERE = os.path.dirname(os.path.abspath(__file__))
FULL = os.path.join(HERE, "Dataset999_Tiny", "nnUNetTrainer__nnUNetPlans__3d_fullres")
MODEL = os.path.join(HERE, "Dataset999_Tiny", "nnUNetTrainer__nnUNetPlans__3d_lowres")


def main():
    os.makedirs(os.path.join(MODEL, "fold_0"), exist_ok=True)
    with open(os.path.join(FULL, "plans.json")) as f:
        plans = json.load(f)
    full = plans["configurations"]["3d_fullres"]
    low = copy.deepcopy(full)
    low.update({
        "data_identifier": "nnUNetPlans_3d_lowres",
        "spacing": [3.6, 1.25, 1.5],
        "median_image_size_in_voxels": [7.0, 19.0, 16.0],
        "next_stage": "3d_cascade_fullres",
    })
    plans["configurations"]["3d_lowres"] = low
    plans["configurations"]["3d_cascade_fullres"] = {"inherits_from": "3d_fullres", "previous_stage": "3d_lowres"}
    with open(os.path.join(MODEL, "plans.json"), "w") as f:
        json.dump(plans, f, indent=4)
    for name in ("dataset.json", "dataset_fingerprint.json"):
        shutil.copy(os.path.join(FULL, name), os.path.join(MODEL, name))
    with open(os.path.join(MODEL, "dataset.json")) as f:
        dataset = json.load(f)

    net = make_network(ARCH, 3, 9, (1, 1, 8, 16, 16), 10, os.path.join(HERE, "iolowres.npz"))
    save_final(net, plans, dataset, "3d_lowres", (0, 1, 2), os.path.join(MODEL, "fold_0", "checkpoint_final.pth"))


if __name__ == "__main__":
    main()
    predict(MODEL, os.path.join(HERE, "predictedlowres"))
