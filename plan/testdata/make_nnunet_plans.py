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
    shutil.rmtree(scratch)
    print("wrote", [os.path.join(HERE, "nnunet_" + f) for f in ("dataset_fingerprint.json", "nnUNetPlans.json")])


if __name__ == "__main__":
    sys.exit(main())
