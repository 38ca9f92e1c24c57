package nn

import (
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"

	"go.yaml.in/yaml/v3"
)

// UNetConfig describes a U-Net (the `model:` section of a run's YAML).
// Zero fields take the defaults of WithDefaults, which give the reference
// network of bench/torch_unet_step.py: 1 → 2 channels, features 16-32-64-128,
// 3×3×3 kernels, stride 2 below the first level, two conv–instance
// norm–LeakyReLU(0.01) blocks per level, no deep supervision.
type UNetConfig struct {
	// InChannels is the number of image channels (modalities).
	InChannels int `yaml:"in_channels"`
	// NumClasses is the number of output channels (classes, background
	// included; 1 for a sigmoid/BCE output). OutChannels is an alias.
	NumClasses  int `yaml:"num_classes"`
	OutChannels int `yaml:"out_channels"`
	// Features lists the channels per level, highest resolution first.
	// When empty it is BaseFeatures·2^l capped at MaxFeatures for Levels
	// levels (nnU-Net: 32, 64, 128, 256, 320, 320).
	Features     []int `yaml:"features"`
	BaseFeatures int   `yaml:"base_features"`
	MaxFeatures  int   `yaml:"max_features"`
	Levels       int   `yaml:"levels"`
	// KernelSizes gives each level's (D, H, W) kernel; default 3×3×3. A
	// single entry applies to every level.
	KernelSizes [][3]int `yaml:"kernel_sizes"`
	// Strides gives each level's downsampling stride (D, H, W) of its first
	// convolution; default 1 for level 0 and 2 below. The transposed
	// convolution that comes back up uses the same value as kernel and stride.
	Strides [][3]int `yaml:"strides"`
	// ConvsPerLevel is the number of conv–norm–nonlinearity blocks per
	// encoder level and decoder stage (default 2).
	ConvsPerLevel int `yaml:"convs_per_level"`
	// Norm is "instance" (InstanceNorm3d, affine) or "none".
	Norm    string  `yaml:"norm"`
	NormEps float64 `yaml:"norm_eps"`
	// Nonlinearity is "leaky_relu", "relu" or "none"; NegativeSlope is
	// LeakyReLU's slope (default 0.01).
	Nonlinearity  string   `yaml:"nonlinearity"`
	NegativeSlope *float64 `yaml:"negative_slope"`
	// ConvBias adds a bias to the conv layers of the blocks (default true,
	// as nnU-Net and PyTorch). Transposed convs and heads always have one.
	ConvBias *bool `yaml:"conv_bias"`
	// DeepSupervision adds a 1×1×1 head to every decoder stage but the last,
	// whose outputs the loss weighs 1, ½, ¼, … (lowest 0, renormalised).
	DeepSupervision bool `yaml:"deep_supervision"`
}

// WithDefaults returns c with every unset field given its default.
func (c UNetConfig) WithDefaults() UNetConfig {
	if c.InChannels == 0 {
		c.InChannels = 1
	}
	if c.NumClasses == 0 {
		c.NumClasses = c.OutChannels
	}
	if c.NumClasses == 0 {
		c.NumClasses = 2
	}
	if c.OutChannels == 0 {
		c.OutChannels = c.NumClasses
	}
	if len(c.Features) == 0 {
		if c.Levels == 0 && c.BaseFeatures == 0 && c.MaxFeatures == 0 {
			c.Features = []int{16, 32, 64, 128}
		} else {
			if c.Levels == 0 {
				c.Levels = 4
			}
			if c.BaseFeatures == 0 {
				c.BaseFeatures = 32
			}
			if c.MaxFeatures == 0 {
				c.MaxFeatures = 320
			}
			f := c.BaseFeatures
			for l := 0; l < c.Levels; l++ {
				c.Features = append(c.Features, min(f, c.MaxFeatures))
				f *= 2
			}
		}
	}
	c.Features = append([]int(nil), c.Features...)
	if c.Levels == 0 {
		c.Levels = len(c.Features)
	}
	levels := len(c.Features)
	switch len(c.KernelSizes) {
	case 0:
		c.KernelSizes = nil
		for l := 0; l < levels; l++ {
			c.KernelSizes = append(c.KernelSizes, [3]int{3, 3, 3})
		}
	case 1:
		k := c.KernelSizes[0]
		c.KernelSizes = nil
		for l := 0; l < levels; l++ {
			c.KernelSizes = append(c.KernelSizes, k)
		}
	default:
		c.KernelSizes = append([][3]int(nil), c.KernelSizes...)
	}
	if len(c.Strides) == 0 {
		for l := 0; l < levels; l++ {
			if l == 0 {
				c.Strides = append(c.Strides, [3]int{1, 1, 1})
			} else {
				c.Strides = append(c.Strides, [3]int{2, 2, 2})
			}
		}
	} else {
		c.Strides = append([][3]int(nil), c.Strides...)
	}
	if c.ConvsPerLevel == 0 {
		c.ConvsPerLevel = 2
	}
	if c.Norm == "" {
		c.Norm = "instance"
	}
	if c.NormEps == 0 {
		c.NormEps = 1e-5
	}
	if c.Nonlinearity == "" {
		c.Nonlinearity = "leaky_relu"
	}
	if c.NegativeSlope == nil {
		s := 0.01
		c.NegativeSlope = &s
	}
	if c.ConvBias == nil {
		b := true
		c.ConvBias = &b
	}
	return c
}

// Validate reports the first problem of a configuration that has had its
// defaults applied, naming the field as it appears in YAML.
func (c UNetConfig) Validate() error {
	if c.InChannels < 1 {
		return fmt.Errorf("model.in_channels: %d, want >= 1", c.InChannels)
	}
	if c.NumClasses < 1 {
		return fmt.Errorf("model.num_classes: %d, want >= 1", c.NumClasses)
	}
	if c.OutChannels != c.NumClasses {
		return fmt.Errorf("model.out_channels (%d) and model.num_classes (%d) disagree", c.OutChannels, c.NumClasses)
	}
	if len(c.Features) < 1 {
		return errors.New("model.features: need at least one level")
	}
	if c.Levels != len(c.Features) {
		return fmt.Errorf("model.levels (%d) disagrees with model.features (%d levels)", c.Levels, len(c.Features))
	}
	for l, f := range c.Features {
		if f < 1 {
			return fmt.Errorf("model.features[%d]: %d, want >= 1", l, f)
		}
	}
	if len(c.KernelSizes) != len(c.Features) {
		return fmt.Errorf("model.kernel_sizes: %d entries for %d levels (give one or one per level)", len(c.KernelSizes), len(c.Features))
	}
	if len(c.Strides) != len(c.Features) {
		return fmt.Errorf("model.strides: %d entries for %d levels", len(c.Strides), len(c.Features))
	}
	for l := range c.Features {
		for a := 0; a < 3; a++ {
			if k := c.KernelSizes[l][a]; k < 1 || k%2 == 0 {
				return fmt.Errorf("model.kernel_sizes[%d]: %v, want odd sizes >= 1", l, c.KernelSizes[l])
			}
			if s := c.Strides[l][a]; s < 1 {
				return fmt.Errorf("model.strides[%d]: %v, want sizes >= 1", l, c.Strides[l])
			}
		}
	}
	if c.Strides[0] != [3]int{1, 1, 1} {
		return fmt.Errorf("model.strides[0]: %v, the first level must keep full resolution (1, 1, 1)", c.Strides[0])
	}
	if c.ConvsPerLevel < 1 {
		return fmt.Errorf("model.convs_per_level: %d, want >= 1", c.ConvsPerLevel)
	}
	switch c.Norm {
	case "instance", "none":
	default:
		return fmt.Errorf("model.norm: %q, want instance or none (batch norm is not implemented)", c.Norm)
	}
	if c.NormEps <= 0 {
		return fmt.Errorf("model.norm_eps: %v, want > 0", c.NormEps)
	}
	switch c.Nonlinearity {
	case "leaky_relu", "relu", "none":
	default:
		return fmt.Errorf("model.nonlinearity: %q, want leaky_relu, relu or none", c.Nonlinearity)
	}
	if s := *c.NegativeSlope; s < 0 || s > 1 {
		return fmt.Errorf("model.negative_slope: %v, want in [0, 1]", s)
	}
	if c.DeepSupervision && len(c.Features) < 3 {
		return errors.New("model.deep_supervision: needs at least 3 levels (the lowest decoder output gets weight 0)")
	}
	return nil
}

// slope returns the activation's negative slope (1 = identity).
func (c UNetConfig) slope() float32 {
	switch c.Nonlinearity {
	case "relu":
		return 0
	case "none":
		return 1
	}
	return float32(*c.NegativeSlope)
}

// DecodeSection decodes the top-level key `key` of the YAML document in r
// into *v, rejecting unknown fields inside it (with their line numbers) and
// ignoring the document's other top-level keys. name labels errors (a file
// name). A missing key leaves *v unchanged.
func DecodeSection[T any](r io.Reader, name, key string, v *T) error {
	// A struct built at run time, {V T `yaml:"<key>"`; Rest map `yaml:",inline"`},
	// lets one KnownFields decode of the whole document check the section
	// strictly (with line numbers of the file) while the inline map takes
	// every other top-level key.
	typ := reflect.StructOf([]reflect.StructField{
		{Name: "V", Type: reflect.TypeFor[T](), Tag: reflect.StructTag(`yaml:"` + key + `"`)},
		{Name: "Rest", Type: reflect.TypeFor[map[string]yaml.Node](), Tag: `yaml:",inline"`},
	})
	holder := reflect.New(typ)
	holder.Elem().Field(0).Set(reflect.ValueOf(*v))
	dec := yaml.NewDecoder(r)
	dec.KnownFields(true)
	if err := dec.Decode(holder.Interface()); err != nil {
		if err == io.EOF {
			return nil
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	*v = holder.Elem().Field(0).Interface().(T)
	return nil
}

// LoadModelConfig reads the `model:` section of a run's YAML file, applies
// defaults and validates it.
func LoadModelConfig(path string) (UNetConfig, error) {
	f, err := os.Open(path)
	if err != nil {
		return UNetConfig{}, fmt.Errorf("model config: %w", err)
	}
	defer f.Close()
	var c UNetConfig
	if err := DecodeSection(f, path, "model", &c); err != nil {
		return UNetConfig{}, err
	}
	c = c.WithDefaults()
	if err := c.Validate(); err != nil {
		return UNetConfig{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}
