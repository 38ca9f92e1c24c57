package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	if testutil.Race {
		t.Skip("numeric: skipped under -race")
	}
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
