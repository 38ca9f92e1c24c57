package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/infer"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/nifti"
)

// TestEnsembleFolders: two folders predicted by two tiny checkpoints with
// --save-probabilities, ensembled: the labels are argmax of the mean of
// the folders' probabilities computed here, with the first folder's
// headers; --save-probabilities writes that mean. A case missing from a
// folder and probabilities of different shapes are errors naming them.
func TestEnsembleFolders(t *testing.T) {
	testutil.SkipUnderRace(t, "numeric")
	runs := filepath.Join(t.TempDir(), "runs")
	ck0 := tinyCheckpoint(t, runs, 0, 1, nil)
	ck1 := tinyCheckpoint(t, runs, 1, 2, nil)
	in := nnunetInputs(t)
	root := t.TempDir()
	m0, m1, ens := filepath.Join(root, "m0"), filepath.Join(root, "m1"), filepath.Join(root, "ens")
	for dir, ck := range map[string]string{m0: ck0, m1: ck1} {
		if o, errb, err := runCmd(t, "predict", "--checkpoint", ck, "-i", in, "-o", dir, "--save-probabilities", "--disable-tta", "--threads", "2"); err != nil {
			t.Fatalf("predict: %v\n%s\n%s", err, o, errb)
		}
	}
	o, errb, err := runCmd(t, "ensemble", "-i", m0, m1, "-o", ens, "--save-probabilities")
	if err != nil {
		t.Fatalf("ensemble: %v\n%s\n%s", err, o, errb)
	}
	if !strings.Contains(o.String(), "2 cases ensembled from 2 folders into "+ens) {
		t.Errorf("ensemble's log:\n%s", o)
	}
	for _, id := range []string{"hippocampus_001", "hippocampus_006"} {
		p0 := readProbs(t, filepath.Join(m0, id+".npz"))
		p1 := readProbs(t, filepath.Join(m1, id+".npz"))
		pe := readProbs(t, filepath.Join(ens, id+".npz"))
		mean := make([]float32, len(p0.Data))
		differ := 0
		for i := range mean {
			mean[i] = (p0.Data[i] + p1.Data[i]) / 2
			if d := math.Abs(float64(pe.Data[i] - mean[i])); d > 1e-6 {
				t.Fatalf("%s: ensemble probability %d is %v, the mean %v", id, i, pe.Data[i], mean[i])
			}
		}
		n := len(mean) / 3
		want := infer.Argmax(mean, 3, n)
		a0, a1 := infer.Argmax(p0.Data, 3, n), infer.Argmax(p1.Data, 3, n)
		h, labels, err := nifti.ReadFloat32(filepath.Join(ens, id+".nii.gz"))
		if err != nil {
			t.Fatal(err)
		}
		ref, err := nifti.ReadHeader(filepath.Join(m0, id+".nii.gz"))
		if err != nil {
			t.Fatal(err)
		}
		if h.Dim != ref.Dim || h.Pixdim != ref.Pixdim || h.Srow != ref.Srow || h.SformCode != ref.SformCode {
			t.Errorf("%s: header dim %v pixdim %v, the first folder's %v %v", id, h.Dim, h.Pixdim, ref.Dim, ref.Pixdim)
		}
		for i, l := range labels {
			if uint8(l) != want[i] {
				t.Fatalf("%s: label %d is %v, argmax of the mean %d", id, i, l, want[i])
			}
			if a0[i] != want[i] || a1[i] != want[i] {
				differ++
			}
		}
		if differ == 0 {
			t.Errorf("%s: the mean's labels are each member's; the test cannot tell the ensemble from a member", id)
		}
	}

	// Errors: a case missing from the second folder, then of another shape.
	if err := os.Remove(filepath.Join(m1, "hippocampus_006.npz")); err != nil {
		t.Fatal(err)
	}
	_, _, err = runCmd(t, "ensemble", "-i", m0, "-i", m1, "-o", filepath.Join(root, "e2"))
	if err == nil || !strings.Contains(err.Error(), m1+" lacks the probabilities of 1 case(s)") || !strings.Contains(err.Error(), "hippocampus_006") {
		t.Errorf("a case missing from %s: %v", m1, err)
	}
	b, err := os.ReadFile(filepath.Join(m0, "hippocampus_001.npz"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m1, "hippocampus_006.npz"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = runCmd(t, "ensemble", "-i", m0, m1, "-o", filepath.Join(root, "e3"))
	if err == nil || !strings.Contains(err.Error(), filepath.Join(m0, "hippocampus_006.npz")) || !strings.Contains(err.Error(), filepath.Join(m1, "hippocampus_006.npz")) {
		t.Errorf("probabilities of different shapes: %v", err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ensemble", "-i", m0, "-o", ens}, "1 folder(s), want at least 2"},
		{[]string{"ensemble", "-i", m0, m1}, "--output (-o) is required"},
		{[]string{"ensemble", m0, m1, "-o", ens}, "unexpected argument"},
		{[]string{"ensemble", "-i", m0, m1, "-o", ens, "--dataset-json", filepath.Join(root, "none.json")}, "--dataset-json"},
	} {
		if _, _, err := runCmd(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}

// TestEnsembleRegions: with nnU-Net regions (the demo's labels as "whole"
// = {1, 2} and "posterior" = {2}, regions_class_order [1, 2]) validate
// --save-probabilities writes the sigmoid probabilities of the regions
// and labels painted from them; train ensemble --dataset-json paints the
// mean of two models' probabilities the same way (later regions over
// earlier ones).
func TestEnsembleRegions(t *testing.T) {
	testutil.SkipUnderRace(t, "numeric")
	ds := smallRawDataset(t, "hippocampus_001", "hippocampus_006")
	meta, _ := json.Marshal(map[string]any{"channel_names": map[string]string{"0": "MRI"},
		"labels": map[string]any{"background": 0, "whole": []int{1, 2}, "posterior": []int{2}}, "regions_class_order": []int{1, 2},
		"numTraining": 2, "file_ending": ".nii.gz"})
	if err := os.WriteFile(filepath.Join(ds, "dataset.json"), meta, 0o644); err != nil {
		t.Fatal(err)
	}
	runs := filepath.Join(t.TempDir(), "runs")
	root := t.TempDir()
	order := []int{1, 2}
	var dirs []string
	for fold := 0; fold < 2; fold++ {
		ck := tinyCheckpoint(t, runs, fold, uint64(fold+4), func(c *config.Config) {
			c.Data.Dataset = ds
			c.Model.NumClasses, c.Model.Targets, c.Model.RegionsClassOrder, c.Loss.Name = 2, config.TargetsMultiLabel, order, "dice_bce"
		})
		dir := filepath.Join(root, "val"+itoa(fold))
		if o, errb, err := runCmd(t, "validate", "--checkpoint", ck, "--data", ds, "--output", dir, "--save-probabilities", "--threads", "2"); err != nil {
			t.Fatalf("validate: %v\n%s\n%s", err, o, errb)
		}
		dirs = append(dirs, dir)
	}
	ens := filepath.Join(root, "ens")
	if o, errb, err := runCmd(t, "ensemble", "-i", dirs[0], dirs[1], "-o", ens, "--dataset-json", filepath.Join(ds, "dataset.json")); err != nil {
		t.Fatalf("ensemble: %v\n%s\n%s", err, o, errb)
	}
	for _, id := range []string{"hippocampus_001", "hippocampus_006"} {
		var ps [][]float32
		for _, d := range dirs {
			p := readProbs(t, filepath.Join(d, id+".npz"))
			if p.Shape[0] != 2 {
				t.Fatalf("%s: %d probability channels, want the 2 regions", id, p.Shape[0])
			}
			n := len(p.Data) / 2
			want := infer.MultiLabelLabels(p.Data, 2, n, order)
			_, labels, err := nifti.ReadFloat32(filepath.Join(d, id+".nii.gz"))
			if err != nil {
				t.Fatal(err)
			}
			for i, l := range labels {
				if uint8(l) != want[i] {
					t.Fatalf("%s: validate's label %d is %v, the regions painted from its probabilities %d", filepath.Join(d, id), i, l, want[i])
				}
			}
			ps = append(ps, p.Data)
		}
		mean := make([]float32, len(ps[0]))
		for i := range mean {
			mean[i] = (ps[0][i] + ps[1][i]) / 2
		}
		want := infer.MultiLabelLabels(mean, 2, len(mean)/2, order)
		_, labels, err := nifti.ReadFloat32(filepath.Join(ens, id+".nii.gz"))
		if err != nil {
			t.Fatal(err)
		}
		seen := map[uint8]bool{}
		for i, l := range labels {
			if uint8(l) != want[i] {
				t.Fatalf("%s: ensemble label %d is %v, the regions painted from the mean %d", id, i, l, want[i])
			}
			seen[want[i]] = true
		}
		if !seen[1] || !seen[2] {
			t.Errorf("%s: the ensemble paints %v; the test needs both regions painted somewhere", id, seen)
		}
	}
}
