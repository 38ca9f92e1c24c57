package config

import (
	"strings"
	"testing"
)

func TestModelFromNNUNetsRule(t *testing.T) {
	c, err := Parse([]byte(`
model:
  in_channels: 2
  num_classes: 3
  base_features: 32
  max_features: 320
  levels: 6
  kernel_sizes: [[1, 3, 3], [3, 3, 3], [3, 3, 3], [3, 3, 3], [3, 3, 3], [3, 3, 3]]
  deep_supervision: true
loss:
  name: dice_ce
  batch_dice: true
optim:
  name: sgd
  schedule: {name: poly}
`), "run.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	m := c.Model
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	want := []int{32, 64, 128, 256, 320, 320}
	for i := range want {
		if m.Features[i] != want[i] {
			t.Fatalf("features %v, want nnU-Net's %v", m.Features, want)
		}
	}
	if m.KernelSize(0) != [3]int{1, 3, 3} || m.Stride(1) != [3]int{2, 2, 2} || m.Stride(0) != [3]int{1, 1, 1} || m.NumClasses != 3 || !m.DeepSupervision {
		t.Errorf("parsed %+v", m)
	}
	if !c.Loss.BatchDice || c.Optim.Schedule.Name != "poly" {
		t.Errorf("loss %+v, optim %+v", c.Loss, c.Optim)
	}
	// Written out, every setting is explicit, and it reads back the same.
	text, _ := c.YAML()
	back, err := Parse([]byte(text), "back", "")
	if err != nil {
		t.Fatal(err)
	}
	again, _ := back.YAML()
	if again != text || !strings.Contains(text, "kernel_sizes:") {
		t.Errorf("round trip:\n%s\n---\n%s", text, again)
	}
}

func TestModelErrors(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"model:\n  norm: batch\n", "model.norm"},
		{"model:\n  features: [8, 0]\n", "model.features[1]"},
		{"model:\n  features: [8, 16]\n  strides: [[2, 2, 2], [2, 2, 2]]\n", "model.strides[0]"},
		{"model:\n  kernel_sizes: [[3, 3, 3], [2, 2, 2], [3, 3, 3], [3, 3, 3]]\n", "model.kernel_sizes[1]"},
		{"model:\n  num_classes: 2\n  out_channels: 3\n", "model.out_channels"},
		{"model:\n  features: [8, 16]\n  levels: 3\n", "model.levels"},
		{"model:\n  features: [8, 16]\n  deep_supervision: true\n", "deep_supervision"},
		{"model: [1, 2]\n", "cannot unmarshal"},
		{"model:\n  encoder: resnet\n", "model.encoder: \"resnet\", want plain or residual"},
		{"model:\n  encoder: residual\n", "model.blocks_per_level: 0 entries for 4 levels"},
		{"model:\n  encoder: residual\n  blocks_per_level: [1, 3]\n", "model.blocks_per_level: 2 entries for 4 levels"},
		{"model:\n  encoder: residual\n  blocks_per_level: [1, 0, 1, 1]\n", "model.blocks_per_level[1]: 0"},
		{"model:\n  blocks_per_level: [1, 3, 4, 6]\n", "model.blocks_per_level: [1 3 4 6], but model.encoder is plain"},
		{"model:\n  decoder_convs: -1\n", "model.decoder_convs: -1"},
	} {
		cfg, err := Parse([]byte(c.yaml), "c.yaml", "")
		if err == nil {
			err = cfg.Model.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want it to mention %q", c.yaml, err, c.want)
		}
	}
	// A residual encoder: one blocks_per_level entry serves every level;
	// decoder_convs left out follows convs_per_level.
	cfg, err := Parse([]byte("model:\n  encoder: residual\n  blocks_per_level: [2]\n"), "c.yaml", "")
	if err == nil {
		err = cfg.Model.Validate()
	}
	if m := cfg.Model; err != nil || !m.Residual() || m.ResidualBlocks(3) != 2 || m.DecoderConvsPerStage() != m.ConvsPerLevel {
		t.Errorf("residual encoder: %+v, %v", cfg.Model, err)
	}
	// out_channels alone is read as num_classes.
	cfg, err = Parse([]byte("model:\n  out_channels: 4\n"), "c.yaml", "")
	if err != nil || cfg.Model.NumClasses != 4 {
		t.Errorf("out_channels: %+v, %v", cfg.Model, err)
	}
}

// TestFollowingSettings: settings left out follow the ones they depend
// on, in a file and in code.
func TestFollowingSettings(t *testing.T) {
	d := Default()
	if ce, dice, cl := d.Loss.TermWeights(); ce != 1 || dice != 1 || cl != 0 {
		t.Errorf("dice_ce weights %v %v %v", ce, dice, cl)
	}
	l := d.Loss
	l.Name = "cldice"
	if ce, dice, cl := l.TermWeights(); ce != 0 || dice != 0.5 || cl != 0.5 {
		t.Errorf("cldice weights %v %v %v", ce, dice, cl)
	}
	if d.Optim.BaseLR() != 0.01 || d.Optim.Decay() != 3e-5 {
		t.Errorf("sgd: lr %v, decay %v", d.Optim.BaseLR(), d.Optim.Decay())
	}
	o := d.Optim
	o.Name = "adamw"
	if o.BaseLR() != 1e-3 || o.Decay() != 0.01 {
		t.Errorf("adamw: lr %v, decay %v", o.BaseLR(), o.Decay())
	}
	c, _ := Parse([]byte("optim:\n  name: adamw\n  weight_decay: 0\nloss:\n  name: cldice\n  ce_weight: 0.3\n"), "x", "")
	if c.Optim.Decay() != 0 || c.Optim.BaseLR() != 1e-3 {
		t.Errorf("weight_decay: 0 is 0: %v, lr %v", c.Optim.Decay(), c.Optim.BaseLR())
	}
	if ce, dice, _ := c.Loss.TermWeights(); ce != 0.3 || dice != 0.5 {
		t.Errorf("given ce_weight kept: %v, %v", ce, dice)
	}
	m := d.Model
	m.Features = []int{4, 8, 8}
	if err := m.Validate(); err != nil || m.KernelSize(2) != [3]int{3, 3, 3} || m.Stride(2) != [3]int{2, 2, 2} {
		t.Errorf("three levels set in code: %v", err)
	}
}
