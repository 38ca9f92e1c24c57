package plan

import (
	"math"
	"slices"
)

// Topology is a U-Net's shape for one patch size: per stage the
// downsampling stride of its first convolution and its kernel size, and
// the patch size padded so that every stride divides it. Axes are the
// planner's (after the transpose); 2-D topologies have two.
type Topology struct {
	// PoolsPerAxis counts the stride-2 stages along each axis.
	PoolsPerAxis []int
	// Strides holds one stride per stage; the first is all ones.
	Strides [][]int
	// Kernels holds one kernel size per stage (3 along an axis once its
	// spacing is within a factor 2 of the finest, 1 before).
	Kernels [][]int
	// Patch is the patch size padded to a multiple of DivisibleBy.
	Patch []int
	// DivisibleBy is 2^PoolsPerAxis per axis.
	DivisibleBy []int
}

// Stages is the number of resolution stages (encoder levels).
func (t Topology) Stages() int { return len(t.Strides) }

// poolAndConvProps is nnU-Net v2's get_pool_and_conv_props
// (nnunetv2/experiment_planning/experiment_planners/network_topology.py):
// starting from spacing and patch, it repeatedly halves every axis whose
// spacing is within a factor 2 of the finest poolable axis, while the
// axis keeps at least 2·minFeatureMap voxels (3·minFeatureMap when only one
// axis would be pooled) and has been pooled fewer than maxPool times.
// Kernels along an axis become 3 once its spacing is within a factor 2 of
// the finest spacing; the bottleneck's kernel is always 3. patch may hold
// fractions (nnU-Net clips the initial patch to a median shape that can be
// x.5); the padded patch is whole.
func poolAndConvProps(spacing, patch []float64, minFeatureMap, maxPool int) Topology {
	dim := len(spacing)
	sp := append([]float64(nil), spacing...)
	size := append([]float64(nil), patch...)
	strides := [][]int{ones(dim)}
	var kernels [][]int
	pools := make([]int, dim)
	kernel := ones(dim)
	minFM := float64(minFeatureMap)
	for {
		var valid []int
		for i := range dim {
			if size[i] >= 2*minFM {
				valid = append(valid, i)
			}
		}
		if len(valid) < 1 {
			break
		}
		minValid := math.Inf(1)
		for _, i := range valid {
			minValid = math.Min(minValid, sp[i])
		}
		var keep []int
		for _, i := range valid {
			if sp[i]/minValid < 2 && pools[i] < maxPool {
				keep = append(keep, i)
			}
		}
		valid = keep
		if len(valid) == 1 && size[valid[0]] < 3*minFM {
			break
		}
		if len(valid) < 1 {
			break
		}
		minAll := math.Inf(1)
		for _, s := range sp {
			minAll = math.Min(minAll, s)
		}
		for d := range dim {
			if kernel[d] != 3 && sp[d]/minAll < 2 {
				kernel[d] = 3
			}
		}
		stride := ones(dim)
		for _, v := range valid {
			stride[v] = 2
			pools[v]++
			sp[v] *= 2
			size[v] = math.Ceil(size[v] / 2)
		}
		strides = append(strides, stride)
		kernels = append(kernels, append([]int(nil), kernel...))
	}
	div := make([]int, dim)
	for i, p := range pools {
		div[i] = 1 << p
	}
	bottleneck := make([]int, dim)
	for i := range bottleneck {
		bottleneck[i] = 3
	}
	kernels = append(kernels, bottleneck)
	return Topology{PoolsPerAxis: pools, Strides: strides, Kernels: kernels, Patch: padShape(patch, div), DivisibleBy: div}
}

// padShape is nnU-Net's pad_shape: each entry rounded up to a multiple of
// div (an exact multiple stays), truncated to an integer as numpy's
// astype(int) does.
func padShape(shape []float64, div []int) []int {
	out := make([]int, len(shape))
	for i, s := range shape {
		m := float64(div[i])
		r := math.Mod(s, m)
		v := s + m - r
		if r == 0 {
			v -= m
		}
		out[i] = int(v)
	}
	return out
}

func ones(n int) []int {
	o := make([]int, n)
	for i := range o {
		o[i] = 1
	}
	return o
}

// featuresPerStage is nnU-Net's _features_per_stage: base·2^s capped at
// maxFeatures.
func featuresPerStage(stages, base, maxFeatures int) []int {
	f := make([]int, stages)
	for s := range f {
		f[s] = min(maxFeatures, base<<s)
	}
	return f
}

// featureMapVoxels is dynamic_network_architectures' PlainConvUNet
// compute_conv_feature_map_size, nnU-Net's VRAM proxy: the number of
// feature-map elements the convolutions, transposed convolutions and the
// final segmentation head write for one sample of patch, with convs
// blocks per encoder stage and per decoder stage and no deep supervision
// (the planner builds the network without it). Sizes shrink by integer
// division by each stage's stride ("same" padding).
func featureMapVoxels(patch []int, strides [][]int, features []int, convs, classes int) int64 {
	var total int64
	size := patch
	// Encoder: every conv of stage s writes features[s] maps at the size
	// after the stage's stride.
	for s := range strides {
		size = divSize(size, strides[s])
		total += int64(convs) * int64(features[s]) * prodSize(size)
	}
	return total + decoderFeatureMapVoxels(patch, strides, features, convs, classes)
}

// residualFeatureMapVoxels is ResidualEncoderUNet's
// compute_conv_feature_map_size (the ResEnc planners' VRAM proxy): the
// stem's conv at full size; in each stage every residual block's two
// convs, and the skip's 1×1×1 conv (or pool) of a block that strides or
// changes the channels, all at the size after the stage's stride; then
// the decoder as PlainConvUNet's with decConvs convs per stage.
func residualFeatureMapVoxels(patch []int, strides [][]int, features, blocks []int, decConvs, classes int) int64 {
	total := int64(features[0]) * prodSize(patch) // the stem
	size, in := patch, features[0]
	for s := range strides {
		after := divSize(size, strides[s])
		f := int64(features[s])
		total += int64(blocks[s]) * 2 * f * prodSize(after)
		if in != features[s] || !slices.Equal(after, size) {
			total += f * prodSize(after)
		}
		size, in = after, features[s]
	}
	return total + decoderFeatureMapVoxels(patch, strides, features, decConvs, classes)
}

// decoderFeatureMapVoxels is UNetDecoder's compute_conv_feature_map_size
// without deep supervision: stage s (lowest first) works at the size of
// encoder stage n-2-s; its transposed conv and its convs write
// features[n-2-s] maps, the last stage also the segmentation.
func decoderFeatureMapVoxels(patch []int, strides [][]int, features []int, convs, classes int) int64 {
	n := len(strides)
	skips := make([][]int, n-1)
	size := patch
	for s := range skips {
		size = divSize(size, strides[s])
		skips[s] = size
	}
	var total int64
	for s := 0; s < n-1; s++ {
		sz := prodSize(skips[n-2-s])
		f := int64(features[n-2-s])
		total += int64(convs)*f*sz + f*sz
		if s == n-2 {
			total += int64(classes) * sz
		}
	}
	return total
}

func prodSize(s []int) int64 {
	p := int64(1)
	for _, v := range s {
		p *= int64(v)
	}
	return p
}

func divSize(s, by []int) []int {
	o := make([]int, len(s))
	for i := range s {
		o[i] = s[i] / by[i]
	}
	return o
}
