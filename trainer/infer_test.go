package trainer

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/evaluation"
	"github.com/voxtrain/voxtrain/infer"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/nifti"
)

// The tests here check that a run's checkpoints serve package infer:
// prediction keeps the input's geometry, and validation's Dice equals Dice
// counted from the files it writes.

// fastValidation is the default validation with windows that do not
// overlap: what these tests check does not depend on the overlap, and a
// third of the windows keeps the race-enabled suite short.
func fastValidation() config.Validation {
	v := config.Default().Validation
	v.Overlap = 0
	return v
}

// trainedTiny trains the tiny config for one epoch and returns its run.
func trainedTiny(t *testing.T) (*config.Config, *Result) {
	c := tinyConfig(t, t.TempDir())
	c.Train.Epochs = 1
	return c, runTiny(t, c, Options{})
}

// TestPredictKeepsInputGeometry: train predict writes labels whose header
// carries the input's dimensions, voxel sizes, qform and sform.
func TestPredictKeepsInputGeometry(t *testing.T) {
	_, res := trainedTiny(t)
	m, err := infer.LoadModel(filepath.Join(res.RunDir, "checkpoints", "last"), cpu.New(cpu.Options{}), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// A demo case whose origin is not zero, and a copy with an oblique,
	// reflected geometry so every field is exercised.
	in := filepath.Join(testutil.DemoDir(t), "imagesTr", "hippocampus_001.nii.gz")
	h, vals, err := nifti.ReadFloat32(in)
	if err != nil {
		t.Fatal(err)
	}
	oblique := filepath.Join(t.TempDir(), "oblique.nii.gz")
	h.SetAffine(nifti.Matrix4{{0, 0.9, 0.1, -12}, {-1.1, 0, 0, 30}, {0, -0.1, 1.2, 7.5}, {0, 0, 0, 1}}, 2)
	h.QformCode = 1
	if err := nifti.WriteFloat32(oblique, h, vals); err != nil {
		t.Fatal(err)
	}
	for _, input := range []string{in, oblique} {
		out := filepath.Join(t.TempDir(), "pred.nii.gz")
		if err := m.PredictFile(context.Background(), []string{input}, out, fastValidation()); err != nil {
			t.Fatal(err)
		}
		hi, err := nifti.ReadHeader(input)
		if err != nil {
			t.Fatal(err)
		}
		ho, labels, err := nifti.ReadFloat32(out)
		if err != nil {
			t.Fatal(err)
		}
		if ho.Dim != hi.Dim || ho.Pixdim != hi.Pixdim || ho.QformCode != hi.QformCode || ho.SformCode != hi.SformCode ||
			ho.Srow != hi.Srow || ho.QuaternB != hi.QuaternB || ho.QuaternC != hi.QuaternC || ho.QuaternD != hi.QuaternD ||
			ho.QoffsetX != hi.QoffsetX || ho.QoffsetY != hi.QoffsetY || ho.QoffsetZ != hi.QoffsetZ || ho.XYZTUnits != hi.XYZTUnits {
			t.Fatalf("%s: prediction header differs from the input's:\n%+v\n%+v", input, ho, hi)
		}
		ai, _ := hi.Affine()
		ao, _ := ho.Affine()
		if ai != ao {
			t.Fatalf("affine %v, input %v", ao, ai)
		}
		if ho.Datatype != nifti.Uint8 {
			t.Fatalf("labels stored as %v", ho.Datatype)
		}
		for _, v := range labels {
			if v != 0 && v != 1 && v != 2 {
				t.Fatalf("label value %v", v)
			}
		}
	}
}

// TestValidateDiceMatchesWrittenFiles: the Dice train validate reports
// equals Dice counted independently from the prediction files it wrote and
// the reference label files.
func TestValidateDiceMatchesWrittenFiles(t *testing.T) {
	_, res := trainedTiny(t)
	checkValidateAgainstFiles(t, res)
}

// TestValidateResampledScoresTheFilesGrid: with data.target_spacing the
// model works on a resampled grid, but validate scores (and writes) on the
// grid of the files, so its Dice still equals Dice counted from the files.
func TestValidateResampledScoresTheFilesGrid(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model; skipped with -short")
	}
	c := tinyConfig(t, t.TempDir())
	c.Train.Epochs = 1
	c.Data.TargetSpacing = []float64{1.5, 1.25, 1.5}
	checkValidateAgainstFiles(t, runTiny(t, c, Options{}))
}

func checkValidateAgainstFiles(t *testing.T, res *Result) {
	t.Helper()
	m, err := infer.LoadModel(filepath.Join(res.RunDir, "checkpoints", "last"), cpu.New(cpu.Options{}), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	out := t.TempDir()
	sc, err := m.Evaluate(context.Background(), infer.EvalOptions{Fold: -1, OutputDir: out, Validation: fastValidation()})
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Cases) != 16 {
		t.Fatalf("%d validation cases, want fold 0's 16", len(sc.Cases))
	}
	summary, err := evaluation.Read(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(summary.Labels) != 2 || summary.Names[1] != "Anterior" {
		t.Fatalf("summary labels %v named %v, want 1, 2 named as dataset.json names them", summary.Labels, summary.Names)
	}
	sums := make([]float64, 2)
	counts := make([]int, 2)
	for _, c := range summary.Cases {
		id := strings.TrimSuffix(filepath.Base(c.PredictionFile), ".nii.gz")
		if c.PredictionFile != filepath.Join(out, id+".nii.gz") || filepath.Base(c.ReferenceFile) != id+".nii.gz" {
			t.Fatalf("case files %s, %s", c.PredictionFile, c.ReferenceFile)
		}
		_, pred, err := nifti.ReadFloat32(c.PredictionFile)
		if err != nil {
			t.Fatal(err)
		}
		_, ref, err := nifti.ReadFloat32(filepath.Join(testutil.DemoDir(t), "labelsTr", id+".nii.gz"))
		if err != nil {
			t.Fatal(err)
		}
		if len(pred) != len(ref) {
			t.Fatalf("%s: prediction of %d voxels for a label of %d", id, len(pred), len(ref))
		}
		for class := 1; class <= 2; class++ {
			var inter, p, g float64
			for i := range pred {
				pi, gi := pred[i] == float32(class), math.Round(float64(ref[i])) == float64(class)
				if pi && gi {
					inter++
				}
				if pi {
					p++
				}
				if gi {
					g++
				}
			}
			want := math.NaN()
			if p+g > 0 {
				want = 2 * inter / (p + g)
			}
			got := c.Metrics[class-1]
			if math.IsNaN(got.Dice) != math.IsNaN(want) || math.Abs(got.Dice-want) > 1e-12 || got.TP != inter || got.NPred != p || got.NRef != g {
				t.Fatalf("%s class %d: summary %+v, counted from the files Dice %v, TP %v, n_pred %v, n_ref %v", id, class, got, want, inter, p, g)
			}
			if !math.IsNaN(want) {
				sums[class-1] += want
				counts[class-1]++
			}
		}
	}
	for k := range sums {
		want := sums[k] / float64(counts[k])
		if got := summary.Mean[k].Dice; math.Abs(got-want) > 1e-12 {
			t.Fatalf("class %d mean Dice %v, counted %v", k+1, got, want)
		}
	}
}
