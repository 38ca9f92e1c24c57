// Package augment turns one decoded case into one augmented training patch:
// crop, rotation, scaling, elastic deformation, mirroring, quarter turns and
// nnU-Net's intensity transforms, as pure functions of (image channels,
// label, rng). No I/O, no globals; the same seed gives the same bytes on
// every machine.
//
// # Two phases
//
// [Augmenter.Draw] draws every random parameter of a sample from the rng
// (crop, angles, scales, flips, elastic field, intensity parameters) and
// reports in [Plan.Box] which source voxels the sample reads, so a data
// layer backed by a chunked store can load only that region.
// [Augmenter.Apply] then samples the output patch from the source (the
// whole volume, or a sub-box containing Plan.Box with its origin) straight into
// caller-owned destination slices — a slot of a batch buffer — and runs the
// intensity transforms there. With a reused [Plan] and [Workspace] per
// worker goroutine, neither allocates in steady state. [Augmenter.Run] does
// both for a volume in memory.
//
// # One resampling pass
//
// Crop, rotation (about each axis), scaling, mirroring, quarter turns and
// the elastic field compose into a single coordinate map, and only the
// output patch's voxels are sampled from the source (never the whole
// volume transformed and then cropped). Image channels are trilinear
// (Catmull-Rom cubic on request), labels nearest neighbour, and a constant
// outside the volume. Along an output row the map is piecewise linear
// (the elastic field is trilinear between control points), so each voxel's
// source coordinate costs three integer additions in 32.32 fixed point;
// crops, flips and quarter turns without rotation or scaling copy voxels
// exactly. With Workspace.Workers > 1 a sample is split over goroutines by
// slabs of output planes, with the same bytes.
//
// # Determinism
//
// Every floating-point product that feeds a sum is explicitly rounded (Go
// may otherwise fuse it into one FMA instruction on arm64 and other
// architectures), exp/log/sin/cos are this package's own (the math
// package's differ between architectures), reductions combine per-plane
// partial sums in plane order, and noise is drawn per plane from seeds the
// plan drew. TestNoFusedMultiplyAdd checks the compiled code for fused
// instructions; TestSameSeedSameBytes pins the bytes of one sample.
//
// # Foreground-centred crops
//
// A [preprocess.ForegroundIndex] lists up to 10,000 voxel positions per
// present foreground class of a case (as nnU-Net); Draw with forceFG
// centres the patch on a random position of a random present class.
// Normalisation and the index itself are preprocessing (package
// preprocess): deterministic, done once per case.
//
// # Configuration
//
// The transforms and their probabilities are the `augment:` section of a
// run's config, [config.Augment], starting from a preset ("nnunet",
// "light", "none"); see [config.AugmentPreset] for nnU-Net's values and
// where they come from.
package augment
