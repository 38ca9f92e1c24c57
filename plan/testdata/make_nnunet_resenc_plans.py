#!/usr/bin/env python3
"""Make nnU-Net v2's residual-encoder (ResEnc M/L/XL) reference plans.

Companion of make_nnunet_plans.py, and it reuses that script's fingerprints
instead of extracting new ones, so the ResEnc plans come from the very
fingerprints plan/plan_test.go reads:

  * demo (testdata/demo, 80 MSD hippocampus cases): the raw dataset is laid
    out exactly as make_nnunet_plans.py does (symlinks), the committed
    nnunet_dataset_fingerprint.json becomes its dataset_fingerprint.json;
  * synthetic: dataset.json and the tiny image as make_nnunet_plans.py's
    synthetic() writes them, the committed synthetic_fingerprint.json as
    dataset_fingerprint.json.

For each, nnUNetPlannerResEncM, nnUNetPlannerResEncL and
nnUNetPlannerResEncXL (nnunetv2/experiment_planning/experiment_planners/
residual_unets/residual_encoder_unet_planners.py, default VRAM targets 8, 24
and 40 GB) run .plan_experiment(); their plans files are copied here as

    nnunet_resenc_{M,L,XL}_plans.json            (demo)
    nnunet_synthetic_resenc_{M,L,XL}_plans.json  (synthetic)

Before that, the default ExperimentPlanner is run on the same two scratch
datasets and its plans must equal the committed nnunet_nnUNetPlans.json and
nnunet_synthetic_plans.json (the script stops otherwise): a check that this
environment plans as the one that made those.

It also writes nnunet_resenc_feature_maps.json: a list of cases for the
ResidualEncoderUNet (the network of these plans), each

    {"name", "patch", "strides", "kernels", "features", "n_blocks_per_stage",
     "n_conv_per_stage_decoder", "input_channels", "num_classes",
     "estimate", "estimate_deep_supervision", "estimate_plain"}

where "estimate" is exactly ExperimentPlanner.static_estimate_VRAM_usage for
that network (it builds it with get_network_from_plans, deep_supervision left
at the class default False, and calls compute_conv_feature_map_size(patch)),
"estimate_deep_supervision" the same with deep_supervision=True (what the
planner module's __main__ prints), and "estimate_plain" the
static_estimate_VRAM_usage of the PlainConvUNet with the same stages,
n_conv_per_stage [2]*n and n_conv_per_stage_decoder [2]*(n-1). Cases: every
3d_fullres, 3d_lowres and 2d configuration of the six ResEnc plans (input
channels and classes as the planner used them: len(channel_names),
len(labels)) and the 3d example of the planner module's __main__ (patch
128^3, 6 stages, 1 input channel, 3 classes).

Made with Python 3.11.7, nnunetv2 2.8.1, dynamic-network-architectures
0.4.4, torch 2.15.0 (CPU is enough; torch only builds the networks for the
estimate), numpy 2.4.6, SimpleITK 2.5.7. Setup as in make_nnunet_plans.py,
then from the repository root:

    /tmp/venv-plan/bin/python plan/testdata/make_nnunet_resenc_plans.py
"""
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DEMO = os.path.abspath(os.path.join(HERE, "..", "..", "testdata", "demo"))
DEMO_NAME = "Dataset004_Hippocampus"
SYN_NAME = "Dataset900_Synthetic"
PRESETS = ("M", "L", "XL")


def main():
    scratch = tempfile.mkdtemp(prefix="nnunet-resenc-")
    raw = os.path.join(scratch, "raw")
    pre = os.path.join(scratch, "preprocessed")
    # nnunetv2.paths reads these at import time.
    os.environ["nnUNet_raw"] = raw
    os.environ["nnUNet_preprocessed"] = pre
    os.environ["nnUNet_results"] = os.path.join(scratch, "results")

    setup_demo(raw, pre)
    setup_synthetic(raw, pre)

    from nnunetv2.experiment_planning.experiment_planners.default_experiment_planner import ExperimentPlanner
    from nnunetv2.experiment_planning.experiment_planners.residual_unets import residual_encoder_unet_planners as rp

    # The environment must reproduce the committed default plans.
    for name, ref in ((DEMO_NAME, "nnunet_nnUNetPlans.json"), (SYN_NAME, "nnunet_synthetic_plans.json")):
        ExperimentPlanner(name).plan_experiment()
        got = load(os.path.join(pre, name, "nnUNetPlans.json"))
        want = load(os.path.join(HERE, ref))
        if got != want:
            sys.exit("default ExperimentPlanner plans for %s differ from the committed %s; "
                     "regenerate with make_nnunet_plans.py in this environment first" % (name, ref))

    written = []
    for name, prefix in ((DEMO_NAME, "nnunet_resenc_"), (SYN_NAME, "nnunet_synthetic_resenc_")):
        for p in PRESETS:
            planner = getattr(rp, "nnUNetPlannerResEnc" + p)(name)
            planner.plan_experiment()
            dst = os.path.join(HERE, "%s%s_plans.json" % (prefix, p))
            shutil.copy(os.path.join(pre, name, planner.plans_identifier + ".json"), dst)
            written.append((name, dst))

    cases = []
    for name, path in written:
        plans = load(path)
        ds = load(os.path.join(raw, name, "dataset.json"))
        for cfg in ("3d_fullres", "3d_lowres", "2d"):
            c = plans["configurations"].get(cfg)
            if c is None:
                continue
            a = c["architecture"]["arch_kwargs"]
            assert c["architecture"]["network_class_name"].endswith(".ResidualEncoderUNet")
            cases.append(feature_case(
                "%s %s" % (os.path.basename(path)[: -len("_plans.json")], cfg),
                c["patch_size"], a["strides"], a["kernel_sizes"], a["features_per_stage"],
                a["n_blocks_per_stage"], a["n_conv_per_stage_decoder"],
                len(ds["channel_names"]), len(ds["labels"])))
    main_case = feature_case(
        "residual_encoder_unet_planners.py __main__ 3d", [128, 128, 128],
        [[1, 1, 1]] + [[2, 2, 2]] * 5, [[3, 3, 3]] * 6, [32, 64, 128, 256, 320, 320],
        [1, 3, 4, 6, 6, 6], [1, 1, 1, 1, 1], 1, 3)
    cases.append(main_case)
    with open(os.path.join(HERE, "nnunet_resenc_feature_maps.json"), "w") as f:
        f.write(dump_cases(cases))
    print("__main__ 3d case: estimate %d, with deep supervision %d (module comment: 558319104)"
          % (main_case["estimate"], main_case["estimate_deep_supervision"]))
    shutil.rmtree(scratch)


def load(path):
    with open(path) as f:
        return json.load(f)


def setup_demo(raw, pre):
    """The raw layout of make_nnunet_plans.py's main(), with the committed
    fingerprint instead of a fresh extraction."""
    root = os.path.join(raw, DEMO_NAME)
    os.makedirs(os.path.join(root, "imagesTr"))
    os.makedirs(os.path.join(root, "labelsTr"))
    cases = sorted(f[: -len(".nii.gz")] for f in os.listdir(os.path.join(DEMO, "labelsTr")) if f.endswith(".nii.gz"))
    for c in cases:
        os.symlink(os.path.join(DEMO, "imagesTr", c + ".nii.gz"), os.path.join(root, "imagesTr", c + "_0000.nii.gz"))
        os.symlink(os.path.join(DEMO, "labelsTr", c + ".nii.gz"), os.path.join(root, "labelsTr", c + ".nii.gz"))
    with open(os.path.join(root, "dataset.json"), "w") as f:
        json.dump({
            "channel_names": {"0": "MRI"},
            "labels": {"background": 0, "Anterior": 1, "Posterior": 2},
            "numTraining": len(cases),
            "file_ending": ".nii.gz",
        }, f, indent=1)
    os.makedirs(os.path.join(pre, DEMO_NAME))
    shutil.copy(os.path.join(HERE, "nnunet_dataset_fingerprint.json"),
                os.path.join(pre, DEMO_NAME, "dataset_fingerprint.json"))


def setup_synthetic(raw, pre):
    """dataset.json and the tiny image of make_nnunet_plans.py's synthetic(),
    with the committed synthetic_fingerprint.json."""
    import numpy as np
    import SimpleITK as sitk

    root = os.path.join(raw, SYN_NAME)
    os.makedirs(os.path.join(root, "imagesTr"))
    os.makedirs(os.path.join(root, "labelsTr"))
    img = sitk.GetImageFromArray(np.zeros((4, 4, 4), np.float32))
    for ch in range(2):
        sitk.WriteImage(img, os.path.join(root, "imagesTr", "case_000_%04d.nii.gz" % ch))
    sitk.WriteImage(sitk.Cast(img, sitk.sitkUInt8), os.path.join(root, "labelsTr", "case_000.nii.gz"))
    with open(os.path.join(root, "dataset.json"), "w") as f:
        json.dump({"channel_names": {"0": "CT", "1": "T2"},
                   "labels": {"background": 0, "organ": 1, "tumour": 2, "vessel": 3},
                   "numTraining": 30, "file_ending": ".nii.gz"}, f, indent=1)
    os.makedirs(os.path.join(pre, SYN_NAME))
    shutil.copy(os.path.join(HERE, "synthetic_fingerprint.json"),
                os.path.join(pre, SYN_NAME, "dataset_fingerprint.json"))


def feature_case(name, patch, strides, kernels, features, blocks, decoder, in_ch, n_cls):
    from dynamic_network_architectures.architectures.unet import PlainConvUNet, ResidualEncoderUNet
    from nnunetv2.experiment_planning.experiment_planners.default_experiment_planner import ExperimentPlanner
    from nnunetv2.utilities.get_network_from_plans import get_network_from_plans

    dim = len(patch)
    n = len(strides)
    # The arch_kwargs the planners write (conv_bias, instance norm, LeakyReLU
    # only change modules, not the feature map count).
    common = {
        "n_stages": n,
        "features_per_stage": list(features),
        "conv_op": "torch.nn.modules.conv.Conv%dd" % dim,
        "kernel_sizes": [list(k) for k in kernels],
        "strides": [list(s) for s in strides],
        "conv_bias": True,
        "norm_op": "torch.nn.modules.instancenorm.InstanceNorm%dd" % dim,
        "norm_op_kwargs": {"eps": 1e-5, "affine": True},
        "dropout_op": None,
        "dropout_op_kwargs": None,
        "nonlin": "torch.nn.LeakyReLU",
        "nonlin_kwargs": {"inplace": True},
    }
    req = ("conv_op", "norm_op", "dropout_op", "nonlin")
    res = dict(common, n_blocks_per_stage=list(blocks), n_conv_per_stage_decoder=list(decoder))
    plain = dict(common, n_conv_per_stage=[2] * n, n_conv_per_stage_decoder=[2] * (n - 1))

    cls = lambda c: c.__module__ + "." + c.__name__
    est = ExperimentPlanner.static_estimate_VRAM_usage(patch, in_ch, n_cls, cls(ResidualEncoderUNet), res, req)
    est_ds = get_network_from_plans(cls(ResidualEncoderUNet), res, req, in_ch, n_cls, allow_init=False,
                                    deep_supervision=True).compute_conv_feature_map_size(patch)
    est_plain = ExperimentPlanner.static_estimate_VRAM_usage(patch, in_ch, n_cls, cls(PlainConvUNet), plain, req)
    return {
        "name": name,
        "patch": [int(i) for i in patch],
        "strides": [[int(i) for i in s] for s in strides],
        "kernels": [[int(i) for i in k] for k in kernels],
        "features": [int(i) for i in features],
        "n_blocks_per_stage": [int(i) for i in blocks],
        "n_conv_per_stage_decoder": [int(i) for i in decoder],
        "input_channels": int(in_ch),
        "num_classes": int(n_cls),
        "estimate": int(est),
        "estimate_deep_supervision": int(est_ds),
        "estimate_plain": int(est_plain),
    }


def dump_cases(cases):
    """One case per line-group, lists kept on one line."""
    out = []
    for c in cases:
        out.append("  {\n" + ",\n".join("    %s: %s" % (json.dumps(k), json.dumps(v)) for k, v in c.items()) + "\n  }")
    return "[\n" + ",\n".join(out) + "\n]\n"


if __name__ == "__main__":
    sys.exit(main())
