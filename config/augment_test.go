package config

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestPresets(t *testing.T) {
	n := mustPreset(t, PresetNNUNet)
	// nnU-Net v2 get_training_transforms.
	checks := []struct {
		name      string
		got, want float64
	}{
		{"rotation.p", n.Rotation.P, 0.2}, {"rotation max", n.Rotation.Degrees[1], 30},
		{"scaling.p", n.Scaling.P, 0.2}, {"scaling lo", n.Scaling.Range[0], 0.7}, {"scaling hi", n.Scaling.Range[1], 1.4},
		{"elastic.p", n.Elastic.P, 0}, {"mirror.p", n.Mirror.P, 0.5},
		{"noise.p", n.Noise.P, 0.1}, {"noise hi", n.Noise.Std[1], 0.1},
		{"blur.p", n.Blur.P, 0.2}, {"blur per channel", n.Blur.PPerChannel, 0.5}, {"blur hi", n.Blur.Sigma[1], 1},
		{"brightness.p", n.Brightness.P, 0.15}, {"contrast.p", n.Contrast.P, 0.15},
		{"low_res.p", n.LowRes.P, 0.25}, {"low_res lo", n.LowRes.Scale[0], 0.5},
		{"gamma_inverted.p", n.GammaInverted.P, 0.1}, {"gamma.p", n.Gamma.P, 0.3}, {"gamma hi", n.Gamma.Range[1], 1.5},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("nnunet %s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if n.Scaling.PerAxis || !n.Contrast.PreserveRange || !n.Gamma.RetainStats || len(n.Mirror.Axes) != 3 {
		t.Error("nnunet flags")
	}
	l := mustPreset(t, PresetLight)
	if l.Mirror.P != 0.5 || l.Rotation.P != 0 || l.Gamma.P != 0 || l.Noise.P != 0 {
		t.Error("light is crop + mirror only")
	}
	for _, name := range []string{PresetNNUNet, PresetLight, PresetNone} {
		c := mustPreset(t, name)
		if err := c.Validate(); err != nil {
			t.Errorf("preset %s invalid: %v", name, err)
		}
	}
	if _, err := AugmentPreset("heavy"); err == nil {
		t.Error("unknown preset accepted")
	}
	var zero Augment
	if err := zero.Validate(); err != nil {
		t.Errorf("zero Augment invalid: %v", err)
	}
}

// parseAugment parses an augment: section body through the whole loader.
func parseAugment(body string) (Augment, error) {
	doc := "augment:\n  " + strings.ReplaceAll(strings.TrimRight(body, "\n"), "\n", "\n  ") + "\n"
	c, err := Parse([]byte(doc), "test.yaml", "")
	if err != nil {
		return Augment{}, err
	}
	return c.Augment, nil
}

func mustPreset(t *testing.T, name string) Augment {
	t.Helper()
	c, err := AugmentPreset(name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSectionOverridesPreset(t *testing.T) {
	c, err := parseAugment(`
preset: nnunet
rotation:
  p: 0.5
  axes: [0]
blur:
  sigma: [1, 2]
elastic: {p: 0.3, magnitude: [1, 3]}
border_value: -1
`)
	if err != nil {
		t.Fatal(err)
	}
	if c.Rotation.P != 0.5 || c.Rotation.Degrees != [2]float64{-30, 30} || !reflect.DeepEqual(c.Rotation.Axes, []int{0}) {
		t.Errorf("rotation %+v", c.Rotation)
	}
	if c.Blur.P != 0.2 || c.Blur.Sigma != [2]float64{1, 2} || c.Blur.PPerChannel != 0.5 {
		t.Errorf("blur %+v", c.Blur)
	}
	if c.Elastic.P != 0.3 || c.Elastic.Magnitude != [2]float64{1, 3} || c.Elastic.Scale != [2]float64{16, 32} {
		t.Errorf("elastic %+v", c.Elastic)
	}
	if c.Gamma.P != 0.3 || c.BorderValue != -1 || c.Preset != PresetNNUNet {
		t.Errorf("%+v", c)
	}
	// No preset key: "none" with nnU-Net's ranges.
	c, err = parseAugment("gamma: {p: 1}\n")
	if err != nil || c.Preset != PresetNone || c.Gamma.P != 1 || c.Gamma.Range != [2]float64{0.7, 1.5} || c.Rotation.P != 0 {
		t.Errorf("%+v %v", c, err)
	}
	// No section: no augmentation.
	full, err := Parse([]byte("train: {epochs: 1}\n"), "x", "")
	if err != nil || full.Augment.Preset != PresetNone || full.Augment.Mirror.P != 0 {
		t.Errorf("no section: %+v %v", full.Augment, err)
	}
}

func TestSectionErrors(t *testing.T) {
	cases := []struct {
		yaml, want string
	}{
		{"preset: nnunet\nrotaton: {p: 1}\n", `line 3: unknown key "rotaton" in augment`},
		{"preset: nnunet\nblur:\n  p: 0.2\n  sgima: [1, 2]\n", `line 5: unknown key "sgima" in augment.blur`},
		{"preset: heavy\n", `unknown preset "heavy"`},
		{"blur: {p: 2}\n", "line 2: augment.blur.p: probability 2 outside [0, 1]"},
		{"preset: nnunet\nscaling:\n  p: 1\n  range: [1.4, 0.7]\n", "line 5: augment.scaling.range: range low 1.4 > high 0.7"},
		{"mirror: {axes: [0, 3]}\n", "augment.mirror.axes: axis 3 outside 0..2"},
		{"rot90:\n  p: 0.5\n  axes: [1]\n", "line 4: augment.rot90.axes: need at least 2 axes"},
		{"interpolation: nearest\n", `line 2: augment.interpolation: unknown "nearest"`},
		{"low_res: {p: 1, scale: [0.5, 2]}\n", "augment.low_res.scale: range [0.5 2] above 1"},
		{"noise: {p: oops}\n", "line 2"},
		{"- 1\n- 2\n", "want a mapping"},
	}
	for _, c := range cases {
		_, err := parseAugment(c.yaml)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want it to mention %q", c.yaml, err, c.want)
		}
	}
}

// TestConfigEmbedded: the section decodes inside a larger config, on top of
// its preset, and still rejects unknown keys with their line numbers.
func TestConfigEmbedded(t *testing.T) {
	type trainer struct {
		Epochs  int     `yaml:"epochs"`
		Augment Augment `yaml:"augment"`
	}
	var tr trainer
	dec := yaml.NewDecoder(bytes.NewReader([]byte("epochs: 3\naugment:\n  preset: light\n  gamma: {p: 0.5}\n")))
	dec.KnownFields(true)
	if err := dec.Decode(&tr); err != nil {
		t.Fatal(err)
	}
	if tr.Augment.Preset != PresetLight || tr.Augment.Mirror.P != 0.5 || tr.Augment.Gamma.P != 0.5 || tr.Epochs != 3 {
		t.Errorf("%+v", tr)
	}
	dec = yaml.NewDecoder(bytes.NewReader([]byte("epochs: 3\naugment:\n  preset: light\n  gamma: {p: 0.5, invert: true}\n")))
	dec.KnownFields(true)
	err := dec.Decode(&tr)
	if err == nil || !strings.Contains(err.Error(), `line 4: unknown key "invert" in augment.gamma`) {
		t.Errorf("embedded unknown key: %v", err)
	}
	// A missing section leaves the zero Augment: nothing applied.
	var tr2 trainer
	if err := yaml.Unmarshal([]byte("epochs: 1\n"), &tr2); err != nil {
		t.Fatal(err)
	}
	if err := tr2.Augment.Validate(); err != nil {
		t.Error(err)
	}
}
