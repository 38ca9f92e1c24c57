package config

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Augment is the `augment:` section: the random transforms of training
// samples (package augment applies them). Start from a preset with
// `preset:` (nnunet | light | none; see AugmentPreset in defaults.go) and
// override any field of any transform; fields left out keep the preset's
// value. The patch size is not here: it is train.patch_size.
//
// The zero Augment applies no transform at all (every probability is 0).
type Augment struct {
	// Preset names the starting point: "nnunet", "light" or "none".
	// Empty means "none".
	Preset string `yaml:"preset"`

	// Interpolation of image channels in the spatial pass: "linear"
	// (trilinear, the default) or "cubic" (Catmull-Rom). Labels always use
	// nearest neighbour.
	Interpolation string `yaml:"interpolation"`
	// BorderValue is the image value sampled outside the volume (nnU-Net: 0).
	BorderValue float64 `yaml:"border_value"`
	// LabelBorderValue is the label value sampled outside the volume
	// (nnU-Net pads labels with -1 and then maps -1 to 0).
	LabelBorderValue uint8 `yaml:"label_border_value"`

	Rotation Rotation `yaml:"rotation"`
	Scaling  Scaling  `yaml:"scaling"`
	Elastic  Elastic  `yaml:"elastic"`
	Mirror   Mirror   `yaml:"mirror"`
	Rot90    Rot90    `yaml:"rot90"`

	Noise         Noise      `yaml:"noise"`
	Blur          Blur       `yaml:"blur"`
	Brightness    Multiplier `yaml:"brightness"`
	Contrast      Contrast   `yaml:"contrast"`
	LowRes        LowRes     `yaml:"low_res"`
	GammaInverted Gamma      `yaml:"gamma_inverted"`
	Gamma         Gamma      `yaml:"gamma"`
}

// Rotation rotates the sampling grid about each listed axis by an angle
// drawn uniformly from Degrees (one draw per axis), with probability P per
// sample.
type Rotation struct {
	P       float64    `yaml:"p"`
	Degrees [2]float64 `yaml:"degrees"`
	// Axes lists the axes rotated about (0 = D, 1 = H, 2 = W). For
	// anisotropic data rotate in-plane only: [0].
	Axes []int `yaml:"axes"`
}

// Scaling scales the sampling grid by a factor drawn uniformly from Range,
// with probability P per sample. A factor > 1 samples a larger source
// region, so structures look smaller (as in nnU-Net).
type Scaling struct {
	P     float64    `yaml:"p"`
	Range [2]float64 `yaml:"range"`
	// PerAxis draws one factor per axis; false scales isotropically.
	PerAxis bool `yaml:"per_axis"`
}

// Elastic adds a smooth random displacement field: random displacements on
// a coarse grid of control points, smoothed, scaled so the largest is
// Magnitude, and upsampled trilinearly to every output voxel. It is
// composed with the affine part into one coordinate map.
type Elastic struct {
	P float64 `yaml:"p"`
	// Magnitude is the largest displacement, in output voxels, drawn
	// uniformly from this range per sample.
	Magnitude [2]float64 `yaml:"magnitude"`
	// Scale is the distance between control points, in output voxels,
	// drawn uniformly from this range per sample: larger is smoother.
	Scale [2]float64 `yaml:"scale"`
}

// Mirror flips each listed axis with probability P, independently.
type Mirror struct {
	P    float64 `yaml:"p"`
	Axes []int   `yaml:"axes"`
}

// Rot90 rotates by k·90° (k uniform in 1..3) in a plane of two axes drawn
// from Axes, with probability P per sample.
type Rot90 struct {
	P    float64 `yaml:"p"`
	Axes []int   `yaml:"axes"`
}

// Noise adds zero-mean Gaussian noise whose standard deviation is drawn
// uniformly from Std, with probability P per sample, the same draw for
// every channel (nnU-Net calls this range noise_variance but uses the
// draw as the standard deviation; it is named for what it is here).
type Noise struct {
	P   float64    `yaml:"p"`
	Std [2]float64 `yaml:"std"`
}

// Blur smooths with a Gaussian whose sigma (voxels) is drawn from Sigma per
// axis and per channel; with probability P per sample, then PPerChannel per
// channel.
type Blur struct {
	P           float64    `yaml:"p"`
	Sigma       [2]float64 `yaml:"sigma"`
	PPerChannel float64    `yaml:"p_per_channel"`
}

// Multiplier multiplies each channel by a factor drawn from Range (half the
// draws below 1, half above, as nnU-Net's BGContrast), with probability P.
type Multiplier struct {
	P     float64    `yaml:"p"`
	Range [2]float64 `yaml:"range"`
}

// Contrast scales each channel about its mean by a factor drawn like
// Multiplier's; PreserveRange clips the result to the channel's former
// [min, max].
type Contrast struct {
	P             float64    `yaml:"p"`
	Range         [2]float64 `yaml:"range"`
	PreserveRange bool       `yaml:"preserve_range"`
}

// LowRes simulates low resolution: downsample by a factor drawn from Scale
// (nearest), then upsample back (trilinear); per channel with probability
// PPerChannel, on the listed axes.
type LowRes struct {
	P           float64    `yaml:"p"`
	Scale       [2]float64 `yaml:"scale"`
	PPerChannel float64    `yaml:"p_per_channel"`
	Axes        []int      `yaml:"axes"`
}

// Gamma maps each channel to [0, 1] by its range, raises it to a gamma drawn
// from Range (BGContrast sampling), and maps back; RetainStats restores the
// channel's mean and standard deviation. gamma_inverted does the same on
// the negated image.
type Gamma struct {
	P           float64    `yaml:"p"`
	Range       [2]float64 `yaml:"range"`
	RetainStats bool       `yaml:"retain_stats"`
}

// plainAugment is Augment without its UnmarshalYAML: what the section's
// keys decode into, on top of the preset.
type plainAugment Augment

// UnmarshalYAML decodes a section on top of its preset, rejects unknown
// keys with their line numbers (also when the section is embedded in a
// larger config: yaml.v3 does not pass KnownFields to custom unmarshalers),
// and validates the result, naming the line of each bad field.
func (c *Augment) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: augment: want a mapping, got %s", n.Line, kindName(n))
	}
	lines := map[string]int{}
	if err := checkKnownKeys(n, reflect.TypeFor[plainAugment](), "augment", lines); err != nil {
		return err
	}
	name := ""
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "preset" {
			if err := n.Content[i+1].Decode(&name); err != nil {
				return fmt.Errorf("line %d: augment.preset: %w", n.Content[i+1].Line, err)
			}
		}
	}
	p, err := AugmentPreset(name)
	if err != nil {
		return fmt.Errorf("line %d: %w", lines["augment.preset"], err)
	}
	if err := n.Decode((*plainAugment)(&p)); err != nil {
		return fmt.Errorf("augment: %w", err)
	}
	if p.Preset == "" {
		p.Preset = PresetNone
	}
	if err := p.Validate(); err != nil {
		return withLines(err, lines)
	}
	*c = p
	return nil
}

// fieldError is one invalid field of an Augment section.
type fieldError struct {
	field, msg string // field: "augment.blur.p"
	line       int    // 0 when not known
}

func (e *fieldError) Error() string {
	if e.line > 0 {
		return fmt.Sprintf("line %d: %s: %s", e.line, e.field, e.msg)
	}
	return e.field + ": " + e.msg
}

// withLines adds the YAML line of each invalid field (or its closest
// enclosing key) to Validate's errors.
func withLines(err error, lines map[string]int) error {
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return err
	}
	var out []error
	for _, e := range joined.Unwrap() {
		if fe, ok := e.(*fieldError); ok {
			for p := fe.field; p != "" && fe.line == 0; {
				fe.line = lines[p]
				i := strings.LastIndexByte(p, '.')
				if i < 0 {
					break
				}
				p = p[:i]
			}
		}
		out = append(out, e)
	}
	return errors.Join(out...)
}

// Validate checks every field and names the first bad one.
func (c *Augment) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &fieldError{field: "augment." + field, msg: fmt.Sprintf(format, args...)})
	}
	prob := func(field string, p float64) {
		if !(p >= 0 && p <= 1) {
			bad(field, "probability %v outside [0, 1]", p)
		}
	}
	rng := func(field string, r [2]float64, min float64, minOpen bool) {
		if math.IsNaN(r[0]) || math.IsNaN(r[1]) || math.IsInf(r[0], 0) || math.IsInf(r[1], 0) {
			bad(field, "range %v is not finite", r)
			return
		}
		if r[0] > r[1] {
			bad(field, "range low %v > high %v", r[0], r[1])
		}
		if (minOpen && r[0] <= min) || (!minOpen && r[0] < min) {
			op := ">="
			if minOpen {
				op = ">"
			}
			bad(field, "range %v must be %s %v", r, op, min)
		}
	}
	axes := func(field string, a []int, need int) {
		seen := [3]bool{}
		for _, x := range a {
			if x < 0 || x > 2 {
				bad(field, "axis %d outside 0..2", x)
				return
			}
			if seen[x] {
				bad(field, "axis %d listed twice", x)
				return
			}
			seen[x] = true
		}
		if len(a) < need {
			bad(field, "need at least %d axes, got %v", need, a)
		}
	}
	switch c.Preset {
	case "", PresetNNUNet, PresetLight, PresetNone:
	default:
		bad("preset", "unknown preset %q (want %s, %s or %s)", c.Preset, PresetNNUNet, PresetLight, PresetNone)
	}
	switch c.Interpolation {
	case "", "linear", "cubic":
	default:
		bad("interpolation", "unknown %q (want linear or cubic)", c.Interpolation)
	}
	if math.IsNaN(c.BorderValue) || math.IsInf(c.BorderValue, 0) {
		bad("border_value", "%v is not finite", c.BorderValue)
	}
	// Ranges are checked when their transform can run or when they are set:
	// the zero Config (all off, all zero) is valid.
	on := func(p float64, r [2]float64) bool { return p > 0 || r != [2]float64{} }
	prob("rotation.p", c.Rotation.P)
	if on(c.Rotation.P, c.Rotation.Degrees) {
		rng("rotation.degrees", c.Rotation.Degrees, -360, false)
		if c.Rotation.Degrees[1] > 360 {
			bad("rotation.degrees", "range %v beyond ±360", c.Rotation.Degrees)
		}
	}
	axes("rotation.axes", c.Rotation.Axes, 0)
	prob("scaling.p", c.Scaling.P)
	if on(c.Scaling.P, c.Scaling.Range) {
		rng("scaling.range", c.Scaling.Range, 0, true)
	}
	prob("elastic.p", c.Elastic.P)
	if on(c.Elastic.P, c.Elastic.Magnitude) {
		rng("elastic.magnitude", c.Elastic.Magnitude, 0, false)
	}
	if on(c.Elastic.P, c.Elastic.Scale) {
		rng("elastic.scale", c.Elastic.Scale, 1, false)
	}
	prob("mirror.p", c.Mirror.P)
	axes("mirror.axes", c.Mirror.Axes, 0)
	prob("rot90.p", c.Rot90.P)
	if c.Rot90.P > 0 {
		axes("rot90.axes", c.Rot90.Axes, 2)
	} else {
		axes("rot90.axes", c.Rot90.Axes, 0)
	}
	prob("noise.p", c.Noise.P)
	if on(c.Noise.P, c.Noise.Std) {
		rng("noise.std", c.Noise.Std, 0, false)
	}
	prob("blur.p", c.Blur.P)
	prob("blur.p_per_channel", c.Blur.PPerChannel)
	if on(c.Blur.P, c.Blur.Sigma) {
		rng("blur.sigma", c.Blur.Sigma, 0, false)
		if c.Blur.Sigma[1] > 32 {
			bad("blur.sigma", "sigma %v above 32 voxels", c.Blur.Sigma[1])
		}
	}
	prob("brightness.p", c.Brightness.P)
	if on(c.Brightness.P, c.Brightness.Range) {
		rng("brightness.range", c.Brightness.Range, 0, false)
	}
	prob("contrast.p", c.Contrast.P)
	if on(c.Contrast.P, c.Contrast.Range) {
		rng("contrast.range", c.Contrast.Range, 0, false)
	}
	prob("low_res.p", c.LowRes.P)
	prob("low_res.p_per_channel", c.LowRes.PPerChannel)
	if on(c.LowRes.P, c.LowRes.Scale) {
		rng("low_res.scale", c.LowRes.Scale, 0, true)
		if c.LowRes.Scale[1] > 1 {
			bad("low_res.scale", "range %v above 1", c.LowRes.Scale)
		}
	}
	axes("low_res.axes", c.LowRes.Axes, 0)
	prob("gamma_inverted.p", c.GammaInverted.P)
	if on(c.GammaInverted.P, c.GammaInverted.Range) {
		rng("gamma_inverted.range", c.GammaInverted.Range, 0, true)
	}
	prob("gamma.p", c.Gamma.P)
	if on(c.Gamma.P, c.Gamma.Range) {
		rng("gamma.range", c.Gamma.Range, 0, true)
	}
	return errors.Join(errs...)
}
