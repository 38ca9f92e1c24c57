#!/usr/bin/env python3
"""Make nnU-Net v2's reference plans for a target spacing given by hand
(nnUNetv2_plan_experiment -overwrite_target_spacing).

It reuses make_nnunet_resenc_plans.py's scratch datasets, which carry the
committed fingerprints (nnunet_dataset_fingerprint.json for the demo,
synthetic_fingerprint.json for the synthetic anisotropic CT), and runs
plan_experiment() with overwrite_target_spacing (in the fingerprint's axis
order, before nnU-Net's transpose) for three cases:

    nnunet_spacing_demo_plans.json       ExperimentPlanner, demo, (2, 1, 1):
                                         an isotropic dataset made
                                         anisotropic (transpose, 2-D first
                                         stages)
    nnunet_spacing_synthetic_plans.json  ExperimentPlanner, synthetic,
                                         (1, 1, 3): the thick axis finer,
                                         the others coarser than the
                                         median; another transpose, and no
                                         3d_lowres (the default plans have
                                         one)
    nnunet_spacing_resenc_m_plans.json   nnUNetPlannerResEncM, demo,
                                         (1.5, 1.5, 1.5)

Made with the environment of make_nnunet_resenc_plans.py (Python 3.11.7,
nnunetv2 2.8.1, dynamic-network-architectures 0.4.4, torch 2.15.0, numpy
2.4.6, SimpleITK 2.5.7); from the repository root:

    /tmp/venv-plan/bin/python plan/testdata/make_nnunet_spacing_plans.py
"""
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

CASES = (
    ("ExperimentPlanner", "demo", [2.0, 1.0, 1.0], "nnunet_spacing_demo_plans.json"),
    ("ExperimentPlanner", "synthetic", [1.0, 1.0, 3.0], "nnunet_spacing_synthetic_plans.json"),
    ("nnUNetPlannerResEncM", "demo", [1.5, 1.5, 1.5], "nnunet_spacing_resenc_m_plans.json"),
)


def main():
    scratch = tempfile.mkdtemp(prefix="nnunet-spacing-")
    raw = os.path.join(scratch, "raw")
    pre = os.path.join(scratch, "preprocessed")
    # nnunetv2.paths reads these at import time.
    os.environ["nnUNet_raw"] = raw
    os.environ["nnUNet_preprocessed"] = pre
    os.environ["nnUNet_results"] = os.path.join(scratch, "results")

    import make_nnunet_resenc_plans as base
    base.setup_demo(raw, pre)
    base.setup_synthetic(raw, pre)

    from nnunetv2.experiment_planning.experiment_planners.default_experiment_planner import ExperimentPlanner
    from nnunetv2.experiment_planning.experiment_planners.residual_unets import residual_encoder_unet_planners as rp

    names = {"demo": base.DEMO_NAME, "synthetic": base.SYN_NAME}
    for cls, ds, spacing, out in CASES:
        planner_cls = ExperimentPlanner if cls == "ExperimentPlanner" else getattr(rp, cls)
        planner = planner_cls(names[ds], overwrite_target_spacing=spacing, plans_name="spacingPlans_" + cls)
        planner.plan_experiment()
        shutil.copy(os.path.join(pre, names[ds], planner.plans_identifier + ".json"), os.path.join(HERE, out))
        print("wrote", out)
    shutil.rmtree(scratch)


if __name__ == "__main__":
    sys.exit(main())
