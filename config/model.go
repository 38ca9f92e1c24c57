package config

import (
	"errors"
	"fmt"
	"math"
)

// Model is the `model:` section: a U-Net (package nn builds it). The
// defaults give the reference network of bench/torch_unet_step.py: 1 → 2
// channels, features 16-32-64-128, 3×3×3 kernels, stride 2 below the first
// level, two conv–instance norm–LeakyReLU(0.01) blocks per level, no deep
// supervision.
type Model struct {
	// InChannels is the number of image channels (modalities).
	InChannels int `yaml:"in_channels"`
	// NumClasses is the number of output channels (classes, background
	// included; 1 for a sigmoid/BCE output). out_channels in a file is
	// read as num_classes.
	NumClasses int `yaml:"num_classes"`
	// Features lists the channels per level, highest resolution first. A
	// file that gives base_features, max_features or levels instead gets
	// base_features·2^l capped at max_features for levels levels, nnU-Net's
	// rule (32, 64, 128, 256, 320, 320); Levels is len(Features). In a
	// file each of the three is ≥ 1 where used: 0 is an error, not the
	// default (a saved config writes base_features and max_features as 0
	// beside explicit features, where they are not used).
	Features     []int `yaml:"features"`
	BaseFeatures int   `yaml:"base_features"`
	MaxFeatures  int   `yaml:"max_features"`
	Levels       int   `yaml:"levels"`
	// KernelSizes gives each level's (D, H, W) kernel: none for 3×3×3
	// everywhere, one entry for every level, or one per level (see
	// KernelSize).
	KernelSizes [][3]int `yaml:"kernel_sizes"`
	// Strides gives each level's downsampling stride (D, H, W) of its first
	// convolution: none for 1 at level 0 and 2 below, or one per level (see
	// Stride). The transposed convolution that comes back up uses the same
	// value as kernel and stride.
	Strides [][3]int `yaml:"strides"`
	// ConvsPerLevel is the number of conv–norm–nonlinearity blocks per
	// encoder level and decoder stage (a plain encoder's levels; the
	// decoder's stages unless DecoderConvs says otherwise).
	ConvsPerLevel int `yaml:"convs_per_level"`
	// Encoder is "plain" (the default: ConvsPerLevel conv blocks per
	// level, nnU-Net's PlainConvUNet) or "residual" (nnU-Net's
	// ResidualEncoderUNet, the encoder of its ResEnc presets: a stem conv
	// block at level 0, then BlocksPerLevel[l] residual blocks per level,
	// the first of a level with its stride; see nn/residual.go).
	Encoder string `yaml:"encoder,omitempty"`
	// BlocksPerLevel is the residual encoder's number of residual blocks
	// per level (nnU-Net's n_blocks_per_stage, e.g. 1, 3, 4, 6, 6, 6):
	// one entry per level, or one for every level.
	BlocksPerLevel []int `yaml:"blocks_per_level,omitempty"`
	// DecoderConvs is the number of conv blocks per decoder stage
	// (nnU-Net's n_conv_per_stage_decoder; 1 in the ResEnc presets); 0
	// means ConvsPerLevel (see DecoderConvsPerStage).
	DecoderConvs int `yaml:"decoder_convs,omitempty"`
	// Norm is "instance" (InstanceNorm3d, affine) or "none".
	Norm    string  `yaml:"norm"`
	NormEps float64 `yaml:"norm_eps"`
	// Nonlinearity is "leaky_relu", "relu" or "none"; NegativeSlope is
	// LeakyReLU's slope.
	Nonlinearity  string  `yaml:"nonlinearity"`
	NegativeSlope float64 `yaml:"negative_slope"`
	// ConvBias adds a bias to the conv layers of the blocks (as nnU-Net and
	// PyTorch). Transposed convs and heads always have one. With instance
	// norm after the conv the bias is a parameter only (checkpoints, ONNX,
	// imports): the norm cancels it, so it is not applied (nn/layers.go).
	ConvBias bool `yaml:"conv_bias"`
	// DeepSupervision adds a 1×1×1 head to every decoder stage but the last,
	// whose outputs the loss weighs 1, ½, ¼, … (lowest 0, renormalised).
	DeepSupervision bool `yaml:"deep_supervision"`
	// Targets is what the outputs are: "softmax" (default: one channel per
	// class, background included, classes exclusive; or one sigmoid
	// channel with loss.name bce) or "multi_label" (one sigmoid channel
	// per class, no background channel, classes may overlap: cellmap's
	// per-class crops, nnU-Net v2's regions). Multi-label labels are
	// bit-packed bytes, bit c for class c (volume.PackedPath), so
	// num_classes is at most 7, the ignore value is 255 and the loss is
	// dice_bce (nnU-Net's DC_and_BCE_loss).
	Targets string `yaml:"targets"`
	// RegionsClassOrder is nnU-Net v2 regions' regions_class_order: the
	// label value region (channel) r paints in a predicted label map. The
	// trainer fills it in from the dataset's dataset.json, so the run's
	// config and every checkpoint carry it and prediction needs no
	// dataset (nnU-Net copies dataset.json into its model folder for the
	// same reason); given by hand it must match. Multi-label only.
	RegionsClassOrder []int `yaml:"regions_class_order,omitempty"`
}

// Encoder kinds (model.encoder).
const (
	EncoderPlain    = "plain"
	EncoderResidual = "residual"
)

// Residual reports whether the encoder is nnU-Net's residual encoder.
func (c Model) Residual() bool { return c.Encoder == EncoderResidual }

// Target kinds (model.targets).
const (
	TargetsSoftmax    = "softmax"
	TargetsMultiLabel = "multi_label"
)

// MultiLabel reports whether the outputs are multi-label sigmoid channels.
func (c Model) MultiLabel() bool { return c.Targets == TargetsMultiLabel }

// Validate reports the first problem of the section, naming the key.
func (c Model) Validate() error {
	if c.InChannels < 1 {
		return fmt.Errorf("model.in_channels: %d, want >= 1", c.InChannels)
	}
	if c.NumClasses < 1 {
		return fmt.Errorf("model.num_classes: %d, want >= 1", c.NumClasses)
	}
	if len(c.Features) < 1 {
		return errors.New("model.features: need at least one level")
	}
	if c.Levels != 0 && c.Levels != len(c.Features) {
		return fmt.Errorf("model.levels (%d) disagrees with model.features (%d levels)", c.Levels, len(c.Features))
	}
	for l, f := range c.Features {
		if f < 1 {
			return fmt.Errorf("model.features[%d]: %d, want >= 1", l, f)
		}
	}
	if n := len(c.KernelSizes); n > 1 && n != len(c.Features) {
		return fmt.Errorf("model.kernel_sizes: %d entries for %d levels (give one or one per level)", n, len(c.Features))
	}
	if n := len(c.Strides); n != 0 && n != len(c.Features) {
		return fmt.Errorf("model.strides: %d entries for %d levels", n, len(c.Features))
	}
	for l := range c.Features {
		k, s := c.KernelSize(l), c.Stride(l)
		for a := 0; a < 3; a++ {
			if k[a] < 1 || k[a]%2 == 0 {
				return fmt.Errorf("model.kernel_sizes[%d]: %v, want odd sizes >= 1", l, k)
			}
			if s[a] < 1 {
				return fmt.Errorf("model.strides[%d]: %v, want sizes >= 1", l, s)
			}
		}
	}
	if s := c.Stride(0); s != [3]int{1, 1, 1} {
		return fmt.Errorf("model.strides[0]: %v, the first level must keep full resolution (1, 1, 1)", s)
	}
	if c.ConvsPerLevel < 1 {
		return fmt.Errorf("model.convs_per_level: %d, want >= 1", c.ConvsPerLevel)
	}
	if c.DecoderConvs < 0 {
		return fmt.Errorf("model.decoder_convs: %d, want >= 1 (or 0 for model.convs_per_level)", c.DecoderConvs)
	}
	switch c.Encoder {
	case EncoderPlain, "":
		if len(c.BlocksPerLevel) > 0 {
			return fmt.Errorf("model.blocks_per_level: %v, but model.encoder is plain (residual blocks need model.encoder: residual)", c.BlocksPerLevel)
		}
	case EncoderResidual:
		if n := len(c.BlocksPerLevel); n != 1 && n != len(c.Features) {
			return fmt.Errorf("model.blocks_per_level: %d entries for %d levels (model.encoder residual needs one per level, or one for every level)", n, len(c.Features))
		}
		for l, b := range c.BlocksPerLevel {
			if b < 1 {
				return fmt.Errorf("model.blocks_per_level[%d]: %d, want >= 1", l, b)
			}
		}
	default:
		return fmt.Errorf("model.encoder: %q, want plain or residual", c.Encoder)
	}
	switch c.Norm {
	case "instance", "none":
	default:
		return fmt.Errorf("model.norm: %q, want instance or none (batch norm is not implemented)", c.Norm)
	}
	if !(c.NormEps > 0) {
		return fmt.Errorf("model.norm_eps: %v, want > 0", c.NormEps)
	}
	switch c.Nonlinearity {
	case "leaky_relu", "relu", "none":
	default:
		return fmt.Errorf("model.nonlinearity: %q, want leaky_relu, relu or none", c.Nonlinearity)
	}
	if s := c.NegativeSlope; !(s >= 0 && s <= 1) || math.IsNaN(s) {
		return fmt.Errorf("model.negative_slope: %v, want in [0, 1]", s)
	}
	switch c.Targets {
	case TargetsSoftmax, "":
	case TargetsMultiLabel:
		// Bit c of a label byte is class c; 255 is the ignore value.
		if c.NumClasses > 7 {
			return fmt.Errorf("model.num_classes: %d, but model.targets multi_label holds at most 7 classes (one bit each of a label byte)", c.NumClasses)
		}
	default:
		return fmt.Errorf("model.targets: %q, want softmax or multi_label", c.Targets)
	}
	if o := c.RegionsClassOrder; o != nil {
		switch {
		case !c.MultiLabel():
			return fmt.Errorf("model.regions_class_order: %v, but regions train sigmoid outputs: set model.targets: multi_label", o)
		case len(o) != c.NumClasses:
			return fmt.Errorf("model.regions_class_order: %d values, model.num_classes is %d (one per region)", len(o), c.NumClasses)
		}
		for _, v := range o {
			if v < 1 || v > 255 {
				return fmt.Errorf("model.regions_class_order: %v: %d is not a label value in 1..255", o, v)
			}
		}
	}
	if c.DeepSupervision && len(c.Features) < 3 {
		return errors.New("model.deep_supervision: needs at least 3 levels (the lowest decoder output gets weight 0)")
	}
	return nil
}
