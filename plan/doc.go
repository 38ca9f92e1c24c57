// Package plan is `train plan`: nnU-Net v2's experiment planning for a
// dataset. Extract computes the dataset fingerprint (spacings, shapes
// after cropping to the nonzero region, foreground intensity statistics);
// Make applies nnU-Net's ExperimentPlanner rules to it (target spacing,
// transpose, patch size, pooling and kernels, features, the VRAM budget,
// batch size, normalisation) for 3d_fullres, 2d and, for large images,
// 3d_lowres; YAML renders a configuration as a run config with a comment
// per derived value, and Write puts everything in an output folder.
//
// The planner is held to nnU-Net's own fingerprint and plans of the demo
// and of a synthetic anisotropic dataset (testdata/, made by
// testdata/make_nnunet_plans.py); docs/PLANNING.md has the comparison.
package plan
