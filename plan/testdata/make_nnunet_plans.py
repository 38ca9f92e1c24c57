#!/usr/bin/env python3
"""Make nnU-Net v2's reference fingerprint and plans for testdata/demo.

Converts the bundled demo (80 MSD hippocampus cases) into nnU-Net v2's raw
layout under a scratch folder (symlinks, no copies), runs nnU-Net's own
fingerprint extraction and default experiment planning (ExperimentPlanner,
8 GB VRAM target) and copies dataset_fingerprint.json and nnUNetPlans.json
here. plan/plan_test.go holds voxtrain's planner to them.

Setup (nnunetv2 2.8.1 was used; torch only builds the network for the VRAM
estimate, any CPU build works):

    python3 -m venv --system-site-packages /tmp/venv-plan
    /tmp/venv-plan/bin/pip install --no-deps nnunetv2 dynamic-network-architectures acvl-utils batchgenerators
    /tmp/venv-plan/bin/pip install SimpleITK nibabel scipy tqdm scikit-image "pandas<2.3" blosc2 "numpy<2"
    /tmp/venv-plan/bin/python plan/testdata/make_nnunet_plans.py   # from the repository root
"""
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DEMO = os.path.abspath(os.path.join(HERE, "..", "..", "testdata", "demo"))
NAME = "Dataset004_Hippocampus"


def main():
    scratch = tempfile.mkdtemp(prefix="nnunet-plan-")
    raw = os.path.join(scratch, "raw")
    pre = os.path.join(scratch, "preprocessed")
    # nnunetv2.paths reads these at import time.
    os.environ["nnUNet_raw"] = raw
    os.environ["nnUNet_preprocessed"] = pre
    os.environ["nnUNet_results"] = os.path.join(scratch, "results")

    root = os.path.join(raw, NAME)
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

    from nnunetv2.experiment_planning.dataset_fingerprint.fingerprint_extractor import DatasetFingerprintExtractor
    from nnunetv2.experiment_planning.experiment_planners.default_experiment_planner import ExperimentPlanner

    DatasetFingerprintExtractor(NAME, num_processes=2).run(overwrite_existing=True)
    ExperimentPlanner(NAME).plan_experiment()

    for f in ("dataset_fingerprint.json", "nnUNetPlans.json"):
        shutil.copy(os.path.join(pre, NAME, f), os.path.join(HERE, "nnunet_" + f))

    synthetic(raw, pre)
    shutil.rmtree(scratch)


def synthetic(raw, pre):
    """Plans for a made-up fingerprint that exercises what the demo does
    not: anisotropic spacing (transpose and the 10th-percentile rule), the
    VRAM loop shrinking the patch, 3d_lowres, CT normalisation and the
    nonzero mask. The planner reads only the fingerprint and dataset.json
    (one tiny image is there for its reader lookup)."""
    import numpy as np
    import SimpleITK as sitk
    from nnunetv2.experiment_planning.experiment_planners.default_experiment_planner import ExperimentPlanner

    name = "Dataset900_Synthetic"
    root = os.path.join(raw, name)
    os.makedirs(os.path.join(root, "imagesTr"))
    os.makedirs(os.path.join(root, "labelsTr"))
    img = sitk.GetImageFromArray(np.zeros((4, 4, 4), np.float32))
    for ch in range(2):
        sitk.WriteImage(img, os.path.join(root, "imagesTr", "case_000_%04d.nii.gz" % ch))
    sitk.WriteImage(sitk.Cast(img, sitk.sitkUInt8), os.path.join(root, "labelsTr", "case_000.nii.gz"))
    n = 30
    with open(os.path.join(root, "dataset.json"), "w") as f:
        json.dump({"channel_names": {"0": "CT", "1": "T2"},
                   "labels": {"background": 0, "organ": 1, "tumour": 2, "vessel": 3},
                   "numTraining": n, "file_ending": ".nii.gz"}, f, indent=1)
    rs = np.random.RandomState(0)
    # (z, y, x) with the thick axis last, so that the planner transposes:
    # x of 2.5 to 6 mm, z and y of 0.6 to 0.9 mm.
    spacings = [[float(s), float(s), float(rs.choice([2.5, 3.0, 5.0, 6.0]))] for s in rs.uniform(0.6, 0.9, n).round(3)]
    shapes = [[int(rs.randint(300, 512)), int(rs.randint(300, 512)), int(rs.randint(40, 140))] for _ in range(n)]
    stats = {"max": 3000.0, "mean": 80.0, "median": 90.0, "min": -1000.0,
             "percentile_00_5": -900.0, "percentile_99_5": 400.0, "std": 150.0}
    fp = {"spacings": spacings, "shapes_after_crop": shapes,
          "foreground_intensity_properties_per_channel": {"0": stats, "1": stats},
          "median_relative_size_after_cropping": 0.6}
    os.makedirs(os.path.join(pre, name))
    for folder in (os.path.join(pre, name), HERE):
        with open(os.path.join(folder, "synthetic_fingerprint.json" if folder == HERE else "dataset_fingerprint.json"), "w") as f:
            json.dump(fp, f, indent=1)
    ExperimentPlanner(name).plan_experiment()
    shutil.copy(os.path.join(pre, name, "nnUNetPlans.json"), os.path.join(HERE, "nnunet_synthetic_plans.json"))


if __name__ == "__main__":
    sys.exit(main())
