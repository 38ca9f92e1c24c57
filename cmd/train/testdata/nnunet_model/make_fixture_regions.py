#!/usr/bin/env python3
"""Make cmd/train/testdata/nnunet_model's region-based model: a trained-model
folder as nnU-Net v2 writes one for a dataset of regions
(nnUNet_results/Dataset998_TinyRegions/nnUNetTrainer__nnUNetPlans__3d_fullres),
for `train import-nnunet`'s region test, and nnU-Net's prediction with it.

    python3 -m venv /tmp/tv && /tmp/tv/bin/pip install torch numpy nnunetv2
    /tmp/tv/bin/python cmd/train/testdata/nnunet_model/make_fixture_regions.py

make_fixture.py's plans and network (features 4-8-16, transpose_forward
[2, 0, 1]) with the demo's labels as regions, as nnU-Net's region-based
training reads them: "whole" = {1, 2} and "posterior" = {2},
regions_class_order [1, 2]. The network has one sigmoid output per region
(nnU-Net's LabelManager.num_segmentation_heads), PyTorch's initialisation
(seed 9) moved by 0.05 * N(0, 1). ioregions.npz holds an input in nnU-Net's
transposed axes and the network's outputs on it; predictedregions/ holds
nnU-Net's own prediction of the demo case hippocampus_001 (nnUNetPredictor,
no mirroring, CPU): labels painted by regions_class_order and the regions'
sigmoid probabilities.
"""
import json
import os
import shutil

from make_fixture import ARCH, FULL_MODEL, HERE, make_network, predict, save_final

MODEL = os.path.join(HERE, "Dataset998_TinyRegions", "nnUNetTrainer__nnUNetPlans__3d_fullres")


def main():
    os.makedirs(os.path.join(MODEL, "fold_0"), exist_ok=True)
    with open(os.path.join(FULL_MODEL, "plans.json")) as f:
        plans = json.load(f)
    plans["dataset_name"] = "Dataset998_TinyRegions"
    with open(os.path.join(MODEL, "plans.json"), "w") as f:
        json.dump(plans, f, indent=4)
    shutil.copy(os.path.join(FULL_MODEL, "dataset_fingerprint.json"), os.path.join(MODEL, "dataset_fingerprint.json"))
    dataset = {"channel_names": {"0": "MRI"}, "labels": {"background": 0, "whole": [1, 2], "posterior": [2]},
               "regions_class_order": [1, 2], "numTraining": 4, "file_ending": ".nii.gz"}
    with open(os.path.join(MODEL, "dataset.json"), "w") as f:
        json.dump(dataset, f, indent=4)

    net = make_network(ARCH, 2, 9, (1, 1, 8, 16, 16), 10, os.path.join(HERE, "ioregions.npz"))
    save_final(net, plans, dataset, "3d_fullres", (0, 1, 2), os.path.join(MODEL, "fold_0", "checkpoint_final.pth"))


if __name__ == "__main__":
    main()
    predict(MODEL, os.path.join(HERE, "predictedregions"))
