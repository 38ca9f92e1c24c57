package main

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/checkpoint"
	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/infer"
	"github.com/voxtrain/voxtrain/internal/npy"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/nifti"
	"github.com/voxtrain/voxtrain/nn"
	"github.com/voxtrain/voxtrain/volume"
)

// tinyCheckpoint saves a freshly initialised tiny U-Net (seed picks the
// weights; edit changes the config first) as checkpoint "last" of
// <dir>/fold_<fold>/run_0 and returns the checkpoint's pointer path. No
// training: predictions only need weights that differ between seeds.
func tinyCheckpoint(t *testing.T, dir string, fold int, seed uint64, edit func(*config.Config)) string {
	t.Helper()
	cfg := config.Default()
	cfg.Seed = seed
	cfg.Experiment = "tiny"
	cfg.Data.Dataset = testutil.DemoDir(t)
	cfg.Model.NumClasses = 3
	cfg.Model.Features = []int{4, 8}
	cfg.Train.PatchSize = [3]int{32, 32, 32}
	cfg.Train.BatchSize = 2
	if edit != nil {
		edit(&cfg)
	}
	dev := cpu.New(cpu.Options{Threads: 1})
	net, err := nn.NewUNet(dev, cfg.Model, cfg.Seed)
	if err != nil {
		t.Fatal(err)
	}
	params, err := nn.ExportParams(dev, net.Params())
	net.Free()
	if err != nil {
		t.Fatal(err)
	}
	text, err := cfg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	run, err := checkpoint.RunDirAt(dir, "tiny", fold, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := checkpoint.Saver{Dir: run.Checkpoints, Policy: config.Default().Checkpoint}
	if _, err := s.Save(&checkpoint.Checkpoint{Epoch: 1, Step: 1, Model: params, Optimizer: []nn.HostTensor{},
		State: map[string]int{}, Config: text, Version: "test"}); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(run.Checkpoints, "last")
}

// nnunetInputs links two demo images into a folder in the nnU-Net layout
// (CASE_0000.nii.gz) and returns it.
func nnunetInputs(t *testing.T) string {
	t.Helper()
	demo := testutil.DemoDir(t)
	dir := filepath.Join(t.TempDir(), "imagesTs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"hippocampus_001", "hippocampus_006"} {
		if err := os.Symlink(filepath.Join(demo, "imagesTr", id+".nii.gz"), filepath.Join(dir, id+"_0000.nii.gz")); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// readProbs reads the probabilities array of an .npz.
func readProbs(t *testing.T, path string) npy.Array {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	arrs, err := npy.ReadNPZ(strings.NewReader(string(raw)), int64(len(raw)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	a, ok := arrs["probabilities"]
	if !ok || len(arrs) != 1 {
		t.Fatalf("%s holds %d arrays, want probabilities alone", path, len(arrs))
	}
	return a
}

// TestPredictFolderEnsemble predicts a folder in the nnU-Net layout with
// each of two tiny checkpoints alone and with both (--model-dir --fold 0
// 1): the ensemble's probabilities are the mean of the members', its
// labels their argmax, every file on the input's grid with its header; a
// rerun with --continue-prediction skips both cases.
func TestPredictFolderEnsemble(t *testing.T) {
	// Six sliding-window predictions, 20 s under the race detector; the
	// pipeline's goroutines are raced in TestPredictStopsBetweenCases.
	testutil.SkipUnderRace(t, "numeric")
	runs := filepath.Join(t.TempDir(), "runs")
	ck0 := tinyCheckpoint(t, runs, 0, 1, nil)
	ck1 := tinyCheckpoint(t, runs, 1, 2, nil)
	in := nnunetInputs(t)
	out := t.TempDir()
	predict := func(dir string, args ...string) string {
		t.Helper()
		o, errb, err := runCmd(t, append([]string{"predict", "-i", in, "-o", dir, "--save-probabilities", "--disable-tta", "--threads", "2"}, args...)...)
		if err != nil {
			t.Fatalf("predict %v: %v\n%s\n%s", args, err, o, errb)
		}
		return o.String()
	}
	predict(filepath.Join(out, "m0"), "--checkpoint", ck0)
	predict(filepath.Join(out, "m1"), "--checkpoint", ck1)
	log := predict(filepath.Join(out, "ens"), "--model-dir", filepath.Join(runs, "tiny"), "--fold", "0", "1")
	for _, want := range []string{"2 cases, 2 checkpoints, mirroring off", "[1/2] hippocampus_001  ", "[2/2] hippocampus_006  ", "2 cases in "} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	for _, id := range []string{"hippocampus_001", "hippocampus_006"} {
		src := filepath.Join(in, id+"_0000.nii.gz")
		ref, err := nifti.ReadHeader(src)
		if err != nil {
			t.Fatal(err)
		}
		shape := []int{int(ref.Dim[3]), int(ref.Dim[2]), int(ref.Dim[1])}
		p0 := readProbs(t, filepath.Join(out, "m0", id+".npz"))
		p1 := readProbs(t, filepath.Join(out, "m1", id+".npz"))
		pe := readProbs(t, filepath.Join(out, "ens", id+".npz"))
		if want := append([]int{3}, shape...); !slices.Equal(pe.Shape, want) || !slices.Equal(p0.Shape, want) {
			t.Fatalf("%s: probabilities of shape %v (member %v), want %v", id, pe.Shape, p0.Shape, want)
		}
		differ := false
		for i := range pe.Data {
			if d := math.Abs(float64(pe.Data[i]) - (float64(p0.Data[i])+float64(p1.Data[i]))/2); d > 1e-6 {
				t.Fatalf("%s: ensemble probability %d is %v, members' mean %v", id, i, pe.Data[i], (p0.Data[i]+p1.Data[i])/2)
			}
			differ = differ || p0.Data[i] != p1.Data[i]
		}
		if !differ {
			t.Errorf("%s: the two members predict the same probabilities; the test cannot tell a mean from either", id)
		}
		h, labels, err := nifti.ReadFloat32(filepath.Join(out, "ens", id+".nii.gz"))
		if err != nil {
			t.Fatal(err)
		}
		if h.Dim != ref.Dim || h.Pixdim != ref.Pixdim || h.SformCode != ref.SformCode || h.Datatype != nifti.Uint8 {
			t.Errorf("%s: label header dims %v pixdim %v, input %v %v", id, h.Dim, h.Pixdim, ref.Dim, ref.Pixdim)
		}
		n := len(labels)
		want := infer.Argmax(pe.Data, 3, n)
		for i, l := range labels {
			if uint8(l) != want[i] {
				t.Fatalf("%s: label %d is %v, argmax of the mean probabilities %d", id, i, l, want[i])
			}
		}
	}
	again := predict(filepath.Join(out, "ens"), "--model-dir", filepath.Join(runs, "tiny"), "--continue-prediction")
	if !strings.Contains(again, "2 of 2 cases already predicted, skipped") || !strings.Contains(again, "0 cases, 2 checkpoints") {
		t.Errorf("--continue-prediction (folds found in --model-dir):\n%s", again)
	}
}

// TestPredictEnsembleMismatch: checkpoints that differ in classes, input
// channels or preprocessing are refused, naming both.
func TestPredictEnsembleMismatch(t *testing.T) {
	runs := filepath.Join(t.TempDir(), "runs")
	ck := tinyCheckpoint(t, runs, 0, 1, nil)
	in := filepath.Join(nnunetInputs(t), "hippocampus_001_0000.nii.gz")
	for fold, c := range []struct {
		edit func(*config.Config)
		want string
	}{
		{func(c *config.Config) { c.Model.NumClasses = 2 }, "has 2 classes (model.num_classes)"},
		{func(c *config.Config) { c.Model.InChannels = 2 }, "has 2 input channels"},
		{func(c *config.Config) { c.Data.Normalization = []string{"none"} }, "has the preprocessing"},
		{func(c *config.Config) { c.Data.TargetSpacing = []float64{1, 1, 1} }, "target_spacing"},
	} {
		other := tinyCheckpoint(t, runs, fold+1, 1, c.edit)
		_, _, err := runCmd(t, "predict", "--checkpoint", ck, "--checkpoint", other, "-i", in, "-o", filepath.Join(t.TempDir(), "x.nii.gz"))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "checkpoints "+filepath.Dir(filepath.Dir(ck))) ||
			!strings.Contains(err.Error(), filepath.Dir(filepath.Dir(other))) {
			t.Errorf("ensemble with %s: %v", c.want, err)
		}
	}
}

// TestPredictInputErrors: a case missing a channel file, or with the wrong
// number of channels, and an unreadable image are errors naming the case
// or file before any case is predicted (no output written).
func TestPredictInputErrors(t *testing.T) {
	runs := filepath.Join(t.TempDir(), "runs")
	ck2 := tinyCheckpoint(t, runs, 0, 1, func(c *config.Config) { c.Model.InChannels = 2 })
	ck1 := tinyCheckpoint(t, runs, 1, 1, nil)
	in := nnunetInputs(t)
	bad := filepath.Join(t.TempDir(), "broken.nii.gz")
	if err := os.WriteFile(bad, []byte("not gzip"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ck, in string
		want   string
	}{
		{ck2, in, "case hippocampus_001 (" + in + "): no channel 0001 file hippocampus_001_0001.nii.gz; the model takes 2 channels"},
		{ck1, filepath.Join(testutil.DemoDir(t), "labelsTr", "hippocampus_001.nii.gz") + "," + in, ""},
		{ck1, bad, bad},
	} {
		out := t.TempDir()
		args := []string{"predict", "--checkpoint", c.ck, "-o", out}
		for _, i := range strings.Split(c.in, ",") {
			args = append(args, "-i", i)
		}
		_, _, err := runCmd(t, args...)
		if c.want == "" {
			// Two cases named hippocampus_001 (a labelsTr file and the
			// nnU-Net one) would overwrite each other.
			c.want = "are both case hippocampus_001"
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("predict -i %s: %v, want %q", c.in, err, c.want)
		}
		if names := testutil.DirNames(t, out); len(names) != 0 {
			t.Errorf("predict -i %s wrote %v before failing", c.in, names)
		}
	}
}

// TestPredictResampledProbabilities: with data.target_spacing the
// probabilities are mapped back onto the input's grid (the logits
// resampled linearly, then the softmax: summing to 1 per voxel); the
// single-case form (-o FILE) writes the .npz beside the label file.
func TestPredictResampledProbabilities(t *testing.T) {
	runs := filepath.Join(t.TempDir(), "runs")
	ck := tinyCheckpoint(t, runs, 0, 3, func(c *config.Config) { c.Data.TargetSpacing = []float64{1.5, 1.5, 1.5} })
	in := filepath.Join(testutil.DemoDir(t), "imagesTr", "hippocampus_011.nii.gz")
	out := filepath.Join(t.TempDir(), "pred.nii.gz")
	if o, errb, err := runCmd(t, "predict", "--checkpoint", ck, "-i", in, "-o", out, "--save-probabilities", "--disable-tta"); err != nil {
		t.Fatalf("%v\n%s\n%s", err, o, errb)
	}
	ref, err := nifti.ReadHeader(in)
	if err != nil {
		t.Fatal(err)
	}
	p := readProbs(t, strings.TrimSuffix(out, ".nii.gz")+".npz")
	if want := []int{3, int(ref.Dim[3]), int(ref.Dim[2]), int(ref.Dim[1])}; !slices.Equal(p.Shape, want) {
		t.Fatalf("probabilities of shape %v, want %v (the input's grid)", p.Shape, want)
	}
	n := len(p.Data) / 3
	for i := 0; i < n; i++ {
		if s := p.Data[i] + p.Data[n+i] + p.Data[2*n+i]; math.Abs(float64(s)-1) > 1e-5 {
			t.Fatalf("voxel %d: probabilities sum to %v", i, s)
		}
	}
	if h, _, err := nifti.ReadFloat32(out); err != nil || h.Dim != ref.Dim {
		t.Errorf("labels: %v, dims %v want %v", err, h.Dim, ref.Dim)
	}
}

// TestPredictSpacingUnit: prediction resamples a NIfTI input (the demo's,
// in millimetres) to data.target_spacing converted into its unit: a
// checkpoint whose target is 1500 µm (data.spacing_unit) predicts what
// one whose target is 1.5 in the files' own unit does, probabilities and
// all.
func TestPredictSpacingUnit(t *testing.T) {
	in := filepath.Join(testutil.DemoDir(t), "imagesTr", "hippocampus_011.nii.gz")
	if f, err := volume.Open(in); err != nil || f.Header().Unit != "millimeter" {
		t.Fatalf("the demo input: %v, want a file in millimetres", err)
	} else {
		f.Close()
	}
	runs := filepath.Join(t.TempDir(), "runs")
	var probs [2]npy.Array
	for i, edit := range []func(*config.Config){
		func(c *config.Config) { c.Data.TargetSpacing = []float64{1.5, 1.5, 1.5} },
		func(c *config.Config) { c.Data.TargetSpacing, c.Data.SpacingUnit = []float64{1500, 1500, 1500}, "um" },
	} {
		ck := tinyCheckpoint(t, runs, i, 3, edit)
		out := filepath.Join(t.TempDir(), "pred.nii.gz")
		if o, errb, err := runCmd(t, "predict", "--checkpoint", ck, "-i", in, "-o", out, "--save-probabilities", "--disable-tta"); err != nil {
			t.Fatalf("%v\n%s\n%s", err, o, errb)
		}
		probs[i] = readProbs(t, strings.TrimSuffix(out, ".nii.gz")+".npz")
	}
	if !slices.Equal(probs[0].Shape, probs[1].Shape) || !slices.Equal(probs[0].Data, probs[1].Data) {
		t.Errorf("target 1500 µm on a millimetre input differs from target 1.5 (shapes %v, %v)", probs[0].Shape, probs[1].Shape)
	}
	// Members whose targets are the same numbers in different units are
	// not ensembled; one that records no unit goes with one that does.
	um := tinyCheckpoint(t, runs, 2, 3, func(c *config.Config) { c.Data.TargetSpacing, c.Data.SpacingUnit = []float64{1500, 1500, 1500}, "um" })
	mm := tinyCheckpoint(t, runs, 3, 3, func(c *config.Config) { c.Data.TargetSpacing, c.Data.SpacingUnit = []float64{1500, 1500, 1500}, "mm" })
	none := tinyCheckpoint(t, runs, 4, 3, func(c *config.Config) { c.Data.TargetSpacing = []float64{1500, 1500, 1500} })
	_, _, err := runCmd(t, "predict", "--checkpoint", um, "--checkpoint", mm, "-i", in, "-o", filepath.Join(t.TempDir(), "x.nii.gz"))
	if err == nil || !strings.Contains(err.Error(), "cannot be ensembled") || !strings.Contains(err.Error(), "in millimeter (data.spacing_unit)") || !strings.Contains(err.Error(), "has it in micrometer") {
		t.Errorf("ensemble of targets in µm and mm: %v", err)
	}
	out := filepath.Join(t.TempDir(), "pred.nii.gz")
	if _, _, err := runCmd(t, "predict", "--checkpoint", none, "--checkpoint", um, "-i", in, "-o", out, "--save-probabilities", "--disable-tta"); err != nil {
		t.Fatalf("ensemble of a target in no unit and one in µm: %v", err)
	}
	if p := readProbs(t, strings.TrimSuffix(out, ".nii.gz")+".npz"); !slices.Equal(p.Shape, probs[1].Shape) || !slices.Equal(p.Data, probs[1].Data) {
		t.Errorf("the ensemble of a target in no unit and one in µm differs from the µm one's prediction (same weights)")
	}
}

// TestPredictStopsBetweenCases: a context ended while a case is predicted
// (here by the post-processing hook of the first case) lets that case be
// written and stops before the next; nothing else, not even a temporary
// file, is left in the output folder.
func TestPredictStopsBetweenCases(t *testing.T) {
	runs := filepath.Join(t.TempDir(), "runs")
	ck := tinyCheckpoint(t, runs, 0, 1, nil)
	f, _, _ := testFactory()
	opts := &PredictOptions{IO: f.IO, OpenDevice: f.OpenDevice, Model: modelFlags{Device: "cpu", Threads: 2}}
	ens, done, err := opts.loadEnsemble([]string{ck})
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	cases, err := infer.FindCases([]string{nnunetInputs(t)}, 1)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	var jobs []infer.Job
	for _, c := range cases {
		jobs = append(jobs, infer.Job{Case: c.Case, Labels: filepath.Join(out, c.ID+".nii.gz"), Probabilities: filepath.Join(out, c.ID+".npz")})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	st, err := ens.Run(ctx, jobs, infer.RunOptions{Window: config.Validation{Overlap: 0.5}, Postprocess: func(labels []uint8, shape [3]int) error {
		calls++
		if len(labels) != shape[0]*shape[1]*shape[2] {
			t.Errorf("post-processing got %d labels for shape %v", len(labels), shape)
		}
		cancel()
		return nil
	}})
	if !errors.Is(err, context.Canceled) || st.Cases != 1 || calls != 1 {
		t.Errorf("Run: %v, %d cases written, post-processing called %d times; want canceled after 1", err, st.Cases, calls)
	}
	if names := testutil.DirNames(t, out); !slices.Equal(names, []string{"hippocampus_001.nii.gz", "hippocampus_001.npz"}) {
		t.Errorf("output folder holds %v", names)
	}
}
