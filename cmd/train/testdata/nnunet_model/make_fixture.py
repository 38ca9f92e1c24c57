#!/usr/bin/env python3
"""Make cmd/train/testdata/nnunet_model: a trained-model folder as nnU-Net v2
writes one (nnUNet_results/Dataset999_Tiny/nnUNetTrainer__nnUNetPlans__3d_fullres),
for `train import-nnunet`'s test, and what nnU-Net's network computes.

    python3 -m venv /tmp/tv && /tmp/tv/bin/pip install torch numpy nnunetv2
    /tmp/tv/bin/python cmd/train/testdata/nnunet_model/make_fixture.py

The plans are nnU-Net's layout with a small 3d_fullres (features 4-8-16, so
that the fixture stays small) and a transpose that is not the identity
(transpose_forward [2, 0, 1], as an anisotropic dataset gets): nnU-Net's
network runs on transposed arrays, voxtrain's on the files' (D, H, W), so
the import must permute every kernel. The network is nnU-Net's own
PlainConvUNet (dynamic_network_architectures, built with nnU-Net's
get_network_from_plans), PyTorch's initialisation (seed 5) moved by
0.05 * N(0, 1) so that the norms are not 1 and 0, saved by torch.save as
nnU-Net's save_checkpoint saves it (network_weights, optimizer_state,
current_epoch, init_args, trainer_name, ...) in fold_0/checkpoint_final.pth;
fold_0/checkpoint_best.pth holds other weights and a _best_ema of 0.625.
io.npz holds an input in nnU-Net's (transposed) axes and the network's
outputs on it (eval mode, every deep-supervision output). predicted/ holds
nnU-Net's own prediction of the demo case hippocampus_001 with this model
(nnUNetPredictor, no mirroring, CPU): its labels and probabilities.
"""
import json
import os

import numpy as np
import torch
from nnunetv2.utilities.get_network_from_plans import get_network_from_plans

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "Dataset999_Tiny", "nnUNetTrainer__nnUNetPlans__3d_fullres")
FULL_MODEL = MODEL

ARCH = {
    "network_class_name": "dynamic_network_architectures.architectures.unet.PlainConvUNet",
    "arch_kwargs": {
        "n_stages": 3,
        "features_per_stage": [4, 8, 16],
        "conv_op": "torch.nn.modules.conv.Conv3d",
        "kernel_sizes": [[1, 3, 3], [3, 3, 3], [3, 3, 3]],
        "strides": [[1, 1, 1], [1, 2, 2], [2, 2, 2]],
        "n_conv_per_stage": [2, 2, 2],
        "n_conv_per_stage_decoder": [2, 2],
        "conv_bias": True,
        "norm_op": "torch.nn.modules.instancenorm.InstanceNorm3d",
        "norm_op_kwargs": {"eps": 1e-05, "affine": True},
        "dropout_op": None,
        "dropout_op_kwargs": None,
        "nonlin": "torch.nn.LeakyReLU",
        "nonlin_kwargs": {"inplace": True},
    },
    "_kw_requires_import": ["conv_op", "norm_op", "dropout_op", "nonlin"],
}


def make_network(arch, outputs, seed, input_shape, input_seed, io_path):
    """nnU-Net's PlainConvUNet for arch with the given outputs, PyTorch's
    initialisation (seed) moved by 0.05 * N(0, 1), in eval mode; io_path
    gets a random input of input_shape (input_seed) and every
    deep-supervision output on it."""
    torch.manual_seed(seed)
    net = get_network_from_plans(arch["network_class_name"], arch["arch_kwargs"], arch["_kw_requires_import"],
                                 1, outputs, allow_init=True, deep_supervision=True)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(0.05 * torch.randn_like(p))
    net.eval()
    x = torch.randn(*input_shape, generator=torch.Generator().manual_seed(input_seed))
    with torch.no_grad():
        ys = net(x)
    np.savez(io_path, input=x.numpy(), **{"output%d" % i: y.numpy() for i, y in enumerate(ys)})
    return net


def save_final(net, plans, dataset, configuration, mirror_axes, path):
    """Save net as nnU-Net's save_checkpoint saves checkpoint_final.pth."""
    torch.save({
        "network_weights": net.state_dict(),
        "optimizer_state": {"state": {}, "param_groups": [{"lr": 0.01}]},
        "grad_scaler_state": None,
        "logging": {"mean_fg_dice": [np.float64(0.1)], "ema_fg_dice": [np.float64(0.1)]},
        "_best_ema": np.float64(0.1),
        "current_epoch": 3,
        "init_args": {"plans": plans, "configuration": configuration, "fold": 0, "dataset_json": dataset,
                      "device": torch.device("cpu")},
        "trainer_name": "nnUNetTrainer",
        "inference_allowed_mirroring_axes": mirror_axes,
    }, path)


def main():
    os.makedirs(os.path.join(MODEL, "fold_0"), exist_ok=True)
    plans = {
        "dataset_name": "Dataset999_Tiny",
        "plans_name": "nnUNetPlans",
        "original_median_spacing_after_transp": [1.0, 1.0, 3.0],
        "original_median_shape_after_transp": [24, 24, 8],
        "image_reader_writer": "SimpleITKIO",
        "transpose_forward": [2, 0, 1],
        "transpose_backward": [1, 2, 0],
        "configurations": {"3d_fullres": {
            "data_identifier": "nnUNetPlans_3d_fullres",
            "preprocessor_name": "DefaultPreprocessor",
            "batch_size": 2,
            "patch_size": [8, 16, 16],
            "median_image_size_in_voxels": [8.0, 24.0, 24.0],
            "spacing": [3.0, 1.0, 1.0],
            "normalization_schemes": ["ZScoreNormalization"],
            "use_mask_for_norm": [False],
            "resampling_fn_data": "resample_data_or_seg_to_shape",
            "resampling_fn_seg": "resample_data_or_seg_to_shape",
            "resampling_fn_data_kwargs": {"is_seg": False, "order": 3, "order_z": 0, "force_separate_z": None},
            "resampling_fn_seg_kwargs": {"is_seg": True, "order": 1, "order_z": 0, "force_separate_z": None},
            "resampling_fn_probabilities": "resample_data_or_seg_to_shape",
            "resampling_fn_probabilities_kwargs": {"is_seg": False, "order": 1, "order_z": 0, "force_separate_z": None},
            "architecture": ARCH,
            "batch_dice": False,
        }},
        "experiment_planner_used": "ExperimentPlanner",
        "label_manager": "LabelManager",
        "foreground_intensity_properties_per_channel": {"0": {
            "max": 900.0, "mean": 300.0, "median": 290.0, "min": 10.0,
            "percentile_00_5": 20.0, "percentile_99_5": 800.0, "std": 100.0}},
    }
    dataset = {"channel_names": {"0": "MRI"}, "labels": {"background": 0, "a": 1, "b": 2},
               "numTraining": 4, "file_ending": ".nii.gz"}
    fingerprint = {
        "foreground_intensity_properties_per_channel": plans["foreground_intensity_properties_per_channel"],
        "median_relative_size_after_cropping": 1.0,
        "shapes_after_crop": [[24, 24, 8]] * 4,
        "spacings": [[1.0, 1.0, 3.0]] * 4,
    }
    for name, obj in (("plans.json", plans), ("dataset.json", dataset), ("dataset_fingerprint.json", fingerprint)):
        with open(os.path.join(MODEL, name), "w") as f:
            json.dump(obj, f, indent=4)

    net = make_network(ARCH, 3, 5, (1, 1, 8, 16, 16), 7, os.path.join(HERE, "io.npz"))
    save_final(net, plans, dataset, "3d_fullres", (0, 1, 2), os.path.join(MODEL, "fold_0", "checkpoint_final.pth"))
    # checkpoint_best.pth: other weights (the final ones moved again) and
    # the EMA pseudo Dice nnU-Net keeps the best by.
    g = torch.Generator().manual_seed(11)
    best = {k: v + 0.05 * torch.randn(v.shape, generator=g) if v.is_floating_point() else v for k, v in net.state_dict().items()}
    torch.save({"network_weights": best, "_best_ema": np.float64(0.625), "current_epoch": 2, "trainer_name": "nnUNetTrainer"},
               os.path.join(MODEL, "fold_0", "checkpoint_best.pth"))


def predict(model=MODEL, out=os.path.join(HERE, "predicted")):
    """nnU-Net's own prediction of the demo case hippocampus_001 with the
    model folder's fold 0 into out (no mirroring, CPU)."""
    import shutil
    import tempfile
    from nnunetv2.inference.predict_from_raw_data import nnUNetPredictor
    demo = os.path.normpath(os.path.join(HERE, "..", "..", "..", "..", "testdata", "demo"))
    tmp = tempfile.mkdtemp()
    shutil.copy(os.path.join(demo, "imagesTr", "hippocampus_001.nii.gz"), os.path.join(tmp, "hippocampus_001_0000.nii.gz"))
    p = nnUNetPredictor(tile_step_size=0.5, use_gaussian=True, use_mirroring=False, perform_everything_on_device=False,
                        device=torch.device("cpu"), verbose=False, allow_tqdm=False)
    p.initialize_from_trained_model_folder(model, use_folds=(0,), checkpoint_name="checkpoint_final.pth")
    p.predict_from_files(tmp, out, save_probabilities=True, overwrite=True, num_processes_preprocessing=1,
                         num_processes_segmentation_export=1)
    for f in os.listdir(out):
        if not f.startswith("hippocampus_001.n"):
            os.remove(os.path.join(out, f))


if __name__ == "__main__":
    main()
    predict()
