package trainer

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/infer"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/nifti"
)

// The tests here check that a run's checkpoints serve package infer:
// prediction keeps the input's geometry, and validation's Dice equals Dice
// counted from the files it writes.

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
		if err := m.PredictFile(context.Background(), []string{input}, out, config.Default().Validation); err != nil {
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
	sc, err := m.Evaluate(context.Background(), infer.EvalOptions{Fold: -1, OutputDir: out, Validation: config.Default().Validation})
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Cases) != 16 {
		t.Fatalf("%d validation cases, want fold 0's 16", len(sc.Cases))
	}
	b, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var summary struct {
		Cases []struct {
			ID   string     `json:"id"`
			Dice []*float64 `json:"dice"`
		} `json:"cases"`
		MeanDice []*float64 `json:"mean_dice"`
	}
	if err := json.Unmarshal(b, &summary); err != nil {
		t.Fatal(err)
	}
	sums := make([]float64, 2)
	counts := make([]int, 2)
	for _, c := range summary.Cases {
		_, pred, err := nifti.ReadFloat32(filepath.Join(out, c.ID+".nii.gz"))
		if err != nil {
			t.Fatal(err)
		}
		_, ref, err := nifti.ReadFloat32(filepath.Join(testutil.DemoDir(t), "labelsTr", c.ID+".nii.gz"))
		if err != nil {
			t.Fatal(err)
		}
		if len(pred) != len(ref) {
			t.Fatalf("%s: prediction of %d voxels for a label of %d", c.ID, len(pred), len(ref))
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
			got := c.Dice[class-1]
			if (got == nil) != math.IsNaN(want) || (got != nil && math.Abs(*got-want) > 1e-12) {
				t.Fatalf("%s class %d: summary Dice %v, counted from the files %v", c.ID, class, deref(got), want)
			}
			if !math.IsNaN(want) {
				sums[class-1] += want
				counts[class-1]++
			}
		}
	}
	for k := range sums {
		want := sums[k] / float64(counts[k])
		if summary.MeanDice[k] == nil || math.Abs(*summary.MeanDice[k]-want) > 1e-12 {
			t.Fatalf("class %d mean Dice %v, counted %v", k+1, deref(summary.MeanDice[k]), want)
		}
	}
}

func deref(p *float64) any {
	if p == nil {
		return "null"
	}
	return *p
}

// TestEvaluateRefusesAFoldOutOfRange: a fold the run's splits do not have
// is an error naming it, not a panic.
func TestEvaluateRefusesAFoldOutOfRange(t *testing.T) {
	_, res := trainedTiny(t)
	m, err := infer.LoadModel(filepath.Join(res.RunDir, "checkpoints", "last"), cpu.New(cpu.Options{}), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	_, err = m.Evaluate(context.Background(), infer.EvalOptions{Fold: 5, Validation: config.Default().Validation})
	if err == nil || !strings.Contains(err.Error(), "data.fold: 5") {
		t.Errorf("fold 5 of a 5-fold run: %v", err)
	}
}
