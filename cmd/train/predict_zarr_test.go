package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/infer"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/preprocess"
	"github.com/voxtrain/voxtrain/volume"
	"github.com/voxtrain/voxtrain/zarr"
)

var updateOMEZarr = flag.Bool("update-ome-zarr", false, "rewrite testdata/blocks.ome.zarr (then rerun testdata/check_ome_zarr.py)")

// writeZarrInput writes a float32 OME-Zarr volume of shape, chunks of 16,
// spacing (2, 0.8, 0.8) µm and origin (10, −5, 3): a smooth blob plus
// noise, so the tiny network's labels vary across it.
func writeZarrInput(t *testing.T, shape [3]int) (string, []float32) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "in.ome.zarr")
	w, err := zarr.CreateImage(dir, zarr.ImageSpec{Name: "image", Shape: shape, Chunks: [3]int{16, 16, 16}, DType: "float32",
		Spacing: [3]float64{2, 0.8, 0.8}, Origin: [3]float64{10, -5, 3}, Unit: "micrometer"})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 8))
	img := make([]float32, shape[0]*shape[1]*shape[2])
	i := 0
	for z := range shape[0] {
		for y := range shape[1] {
			for x := range shape[2] {
				dz, dy, dx := float64(z-shape[0]/2), float64(y-shape[1]/3), float64(x-shape[2]/2)
				img[i] = float32(100*math.Exp(-(dz*dz+dy*dy+dx*dx)/300) + 20*r.Float64())
				i++
			}
		}
	}
	if err := w.WriteBlock(volume.Whole(shape), img); err != nil {
		t.Fatal(err)
	}
	return dir, img
}

// readStore reads an image store whole.
func readStore(t *testing.T, path string) (volume.Header, [][]float32) {
	t.Helper()
	f, err := volume.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := f.Header()
	dst := make([][]float32, h.Channels)
	for c := range dst {
		dst[c] = make([]float32, volume.Whole(h.Shape).Voxels())
	}
	if err := f.ReadRegion(volume.Whole(h.Shape), dst); err != nil {
		t.Fatal(err)
	}
	return h, dst
}

// cancelWriter cancels a context once the text written contains after.
type cancelWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	after  string
	cancel func()
}

func (w *cancelWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.after) {
		w.cancel()
	}
	return n, err
}

// TestPredictBlocksOMEZarr predicts a region of a 64³ Zarr volume in
// blocks of 32 into an OME-Zarr store: stopped after the first block (the
// store then valid, the other blocks 0), finished with
// --continue-prediction (which skips the first), the result read back
// through the zarr reader has the ROI's shape, the input's spacing and
// the ROI's origin, and its labels and probabilities equal a prediction of
// the whole ROI at once with the same normalisation.
func TestPredictBlocksOMEZarr(t *testing.T) {
	testutil.SkipUnderRace(t, "numeric")
	shape := [3]int{64, 64, 64}
	in, img := writeZarrInput(t, shape)
	ck := tinyCheckpoint(t, filepath.Join(t.TempDir(), "runs"), 0, 1, nil)
	out := filepath.Join(t.TempDir(), "pred.ome.zarr")
	roi := volume.Box{Lo: [3]int{4, 0, 8}, Hi: [3]int{60, 64, 64}} // 56×64×56: edge blocks of 24
	args := []string{"predict", "--checkpoint", ck, "-i", in, "-o", out, "--roi", "4:60,:,8:", "--block", "32",
		"--save-probabilities", "--disable-tta", "--threads", "2"}

	// A run stopped after its first block.
	f, _, _ := testFactory()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cw := &cancelWriter{after: "block 1/8", cancel: cancel}
	f.IO.Out = cw
	cmd := NewCmdRoot(f)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "interrupted after 1 of 8 blocks") {
		t.Fatalf("interrupted run: %v\n%s", err, cw.buf.String())
	}
	var prog blockProgress
	b, err := os.ReadFile(filepath.Join(out, progressFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &prog); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(prog.Done, []int{0}) || prog.Blocks != 8 {
		t.Fatalf("progress after the interruption: done %v of %d, want [0] of 8", prog.Done, prog.Blocks)
	}
	// The stopped run's store is valid: it reads whole (block 0 written,
	// the others the fill value 0).
	if h, _ := readStore(t, out); h.Shape != roi.Size() {
		t.Fatalf("stopped run's store: shape %v", h.Shape)
	}

	// --continue-prediction predicts the other seven.
	o, errb, err := runCmd(t, append(args, "--continue-prediction")...)
	if err != nil {
		t.Fatalf("continue: %v\n%s\n%s", err, o, errb)
	}
	log := o.String()
	for _, want := range []string{"8 blocks of [32 32 32], 1 already written", "block 8/8", "1 of 8 blocks already predicted, skipped"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "z-score statistics") {
		t.Errorf("the rerun computed the statistics again instead of reusing the progress file's:\n%s", log)
	}
	// Continuing with other settings, or writing over a store train
	// predict did not write, is refused.
	if _, _, err := runCmd(t, append(args, "--continue-prediction", "--block", "16")...); err == nil || !strings.Contains(err.Error(), "written by another run") {
		t.Errorf("continuing with another --block: %v", err)
	}
	if _, _, err := runCmd(t, "predict", "--checkpoint", ck, "-i", in, "-o", in); err == nil || !strings.Contains(err.Error(), "not written by train predict") {
		t.Errorf("-o naming the input store: %v", err)
	}

	// The store, read back.
	h, labels := readStore(t, out)
	rs := roi.Size()
	if h.Shape != rs || h.Channels != 1 || h.Spacing != [3]float64{2, 0.8, 0.8} || h.Unit != "micrometer" {
		t.Fatalf("labels: shape %v, %d channels, spacing %v %s; want %v, 1, [2 0.8 0.8] micrometer (the input's)", h.Shape, h.Channels, h.Spacing, h.Unit, rs)
	}
	if ox, oy, oz := h.Affine[0][3], h.Affine[1][3], h.Affine[2][3]; math.Abs(ox-(3+0.8*8)) > 1e-9 || oy != -5 || math.Abs(oz-(10+2*4)) > 1e-9 {
		t.Errorf("origin (x, y, z) = (%v, %v, %v), want (9.4, -5, 18): the ROI's first voxel", ox, oy, oz)
	}
	hp, probs := readStore(t, filepath.Join(out, "probabilities"))
	if hp.Shape != rs || hp.Channels != 3 {
		t.Fatalf("probabilities: shape %v, %d channels; want %v, 3", hp.Shape, hp.Channels, rs)
	}
	b, _ = os.ReadFile(filepath.Join(out, progressFile))
	if err := json.Unmarshal(b, &prog); err != nil {
		t.Fatal(err)
	}
	if len(prog.Done) != 8 || len(prog.Normalization) != 1 || prog.Normalization[0].Scheme != "zscore" {
		t.Fatalf("progress: %s", b)
	}

	// The reference: the whole ROI at once (infer.Predict's own window
	// grid), z-scored with the ROI's statistics.
	n := rs[0] * rs[1] * rs[2]
	roiImg := make([]float32, n)
	for z := range rs[0] {
		for y := range rs[1] {
			o := ((roi.Lo[0]+z)*shape[1]+roi.Lo[1]+y)*shape[2] + roi.Lo[2]
			copy(roiImg[(z*rs[1]+y)*rs[2]:][:rs[2]], img[o:o+rs[2]])
		}
	}
	mean, std, err := preprocess.MeanStd(roiImg, nil)
	if err != nil {
		t.Fatal(err)
	}
	nm := prog.Normalization[0]
	if math.Abs(nm.Mean-mean) > 1e-9*math.Abs(mean) || math.Abs(nm.Std-std) > 1e-9*std {
		t.Errorf("streamed z-score statistics %v, %v; the ROI's %v, %v", nm.Mean, nm.Std, mean, std)
	}
	if err := preprocess.CTNormalize(roiImg, nm.stats()); err != nil {
		t.Fatal(err)
	}
	m, err := infer.LoadModel(ck, cpu.New(cpu.Options{Threads: 2}), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	want, err := m.Probabilities(context.Background(), &data.Volume{Shape: rs, Image: [][]float32{roiImg}}, config.Validation{Overlap: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := infer.Argmax(want, 3, n)
	var maxDiff float64
	classes := map[float32]bool{}
	for i := range n {
		classes[labels[0][i]] = true
		if labels[0][i] != float32(wantLabels[i]) {
			t.Fatalf("voxel %d: blockwise label %v, whole-ROI %d", i, labels[0][i], wantLabels[i])
		}
		for c := range 3 {
			maxDiff = max(maxDiff, math.Abs(float64(probs[c][i]-want[c*n+i])))
		}
	}
	// The same windows, summed in the same order: equal bit for bit here
	// (0 observed); 1e-6 allows a device whose kernels round differently
	// with the batch's grouping of the windows, which blocks change.
	if maxDiff > 1e-6 {
		t.Errorf("probabilities differ from the whole ROI's by up to %g", maxDiff)
	}
	t.Logf("labels %v; probabilities within %g of the whole ROI's", classes, maxDiff)
	if len(classes) < 2 {
		t.Errorf("every voxel has one label %v: the comparison shows nothing", classes)
	}
}

// TestPredictBlocksOMEZarrFixture predicts a small ROI into
// testdata/blocks.ome.zarr with -update-ome-zarr (the fixture
// testdata/check_ome_zarr.py opens with ome-zarr-py), and checks the
// committed store reads back through the zarr reader as that script
// expects.
func TestPredictBlocksOMEZarrFixture(t *testing.T) {
	fixture := filepath.Join("testdata", "blocks.ome.zarr")
	if *updateOMEZarr {
		in, _ := writeZarrInput(t, [3]int{40, 40, 40})
		ck := tinyCheckpoint(t, filepath.Join(t.TempDir(), "runs"), 0, 1, nil)
		os.RemoveAll(fixture)
		if o, errb, err := runCmd(t, "predict", "--checkpoint", ck, "-i", in, "-o", fixture, "--roi", "8:24,4:20,12:28",
			"--block", "8", "--save-probabilities", "--disable-tta", "--threads", "2"); err != nil {
			t.Fatalf("%v\n%s\n%s", err, o, errb)
		}
	}
	h, labels := readStore(t, fixture)
	if h.Shape != [3]int{16, 16, 16} || h.Spacing != [3]float64{2, 0.8, 0.8} || h.Affine[2][3] != 10+2*8 {
		t.Errorf("fixture labels: shape %v spacing %v affine %v", h.Shape, h.Spacing, h.Affine)
	}
	hp, probs := readStore(t, filepath.Join(fixture, "probabilities"))
	if hp.Shape != h.Shape || hp.Channels != 3 {
		t.Errorf("fixture probabilities: shape %v, %d channels", hp.Shape, hp.Channels)
	}
	// Labels are the argmax of the probabilities stored beside them.
	for i, l := range labels[0] {
		best := 0
		for c := 1; c < 3; c++ {
			if probs[c][i] > probs[best][i] {
				best = c
			}
		}
		if float32(best) != l {
			t.Fatalf("voxel %d: label %v, argmax of the probabilities %d", i, l, best)
		}
	}
}

// TestPredictBlocksFlags: --roi and --block parse, and are refused for a
// NIfTI output; bad values name the flag.
func TestPredictBlocksFlags(t *testing.T) {
	o, err := capture(t, NewCmdPredict, "--checkpoint", "c", "-i", "in.zarr", "-o", "out.ome.zarr", "--roi", "1:5,:,3:", "--block", "16,32,64")
	if err != nil {
		t.Fatal(err)
	}
	if o.ROI != "1:5,:,3:" || o.Block != [3]int{16, 32, 64} {
		t.Errorf("ROI %q, block %v", o.ROI, o.Block)
	}
	if r, _ := parseROI(o.ROI); r != [3][2]int{{1, 5}, {-1, -1}, {3, -1}} {
		t.Errorf("parseROI: %v", r)
	}
	if b, err := resolveROI([3][2]int{{1, 5}, {-1, -1}, {3, -1}}, [3]int{10, 20, 30}); err != nil || b != (volume.Box{Lo: [3]int{1, 0, 3}, Hi: [3]int{5, 20, 30}}) {
		t.Errorf("resolveROI: %v, %v", b, err)
	}
	if _, err := resolveROI([3][2]int{{1, 50}, {-1, -1}, {-1, -1}}, [3]int{10, 20, 30}); err == nil {
		t.Error("an ROI past the volume: no error")
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-o", "x.nii.gz", "--roi", "1:5,:,:"}, "OME-Zarr"},
		{[]string{"-o", "x.ome.zarr", "--roi", "1:5,:"}, "--roi"},
		{[]string{"-o", "x.ome.zarr", "--roi", "5:1,:,:"}, "empty"},
		{[]string{"-o", "x.ome.zarr", "--block", "0"}, "--block"},
		{[]string{"-o", "x.ome.zarr", "--block", "8,8"}, "--block"},
	} {
		_, err := capture(t, NewCmdPredict, append([]string{"--checkpoint", "c", "-i", "in.zarr"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one naming %q", c.args, err, c.want)
		}
	}
}

// TestPredictBlocksSpacingUnit: a checkpoint whose data.target_spacing is
// in millimetres (data.spacing_unit) predicts an OME-Zarr input in
// micrometres at the matching spacing (2 µm = 0.002 mm), and refuses one
// at the same numbers in the wrong unit, naming both units; without
// spacing_unit the numbers are compared as they are (the input's unit).
func TestPredictBlocksSpacingUnit(t *testing.T) {
	in, _ := writeZarrInput(t, [3]int{16, 16, 16}) // spacing (2, 0.8, 0.8) µm
	runs := filepath.Join(t.TempDir(), "runs")
	predict := func(fold int, target []float64, unit string) error {
		ck := tinyCheckpoint(t, runs, fold, 1, func(c *config.Config) {
			c.Data.TargetSpacing, c.Data.SpacingUnit = target, unit
		})
		_, _, err := runCmd(t, "predict", "--checkpoint", ck, "-i", in, "-o", filepath.Join(t.TempDir(), "pred.ome.zarr"),
			"--block", "16", "--disable-tta", "--threads", "1")
		return err
	}
	if err := predict(0, []float64{0.002, 0.0008, 0.0008}, "mm"); err != nil {
		t.Errorf("target 0.002, 0.0008, 0.0008 mm on a 2, 0.8, 0.8 µm input: %v", err)
	}
	if err := predict(1, []float64{2, 0.8, 0.8}, ""); err != nil {
		t.Errorf("target 2, 0.8, 0.8 in no stated unit on a 2, 0.8, 0.8 µm input: %v", err)
	}
	err := predict(2, []float64{2, 0.8, 0.8}, "millimeter")
	if err == nil || !strings.Contains(err.Error(), "the input's spacing [2 0.8 0.8] micrometer is not the checkpoint's data.target_spacing [2 0.8 0.8] millimeter = [2000 800 800] micrometer") {
		t.Errorf("target 2, 0.8, 0.8 mm on a 2, 0.8, 0.8 µm input: %v, want a refusal naming both units", err)
	}
}

// TestCheckBlockwiseSpecUnits: the input's spacing is compared with
// data.target_spacing converted into the input's unit; an input that
// states no unit is taken to be in spacing_unit.
func TestCheckBlockwiseSpecUnits(t *testing.T) {
	d := config.Default().Data
	d.TargetSpacing, d.SpacingUnit = []float64{0.004, 0.004, 0.004}, "um"
	for _, tc := range []struct {
		h  volume.Header
		ok bool
	}{
		{volume.Header{Spacing: [3]float64{4, 4, 4}, Unit: "nanometer"}, true},
		{volume.Header{Spacing: [3]float64{0.004, 0.004, 0.004}, Unit: "micrometer"}, true},
		{volume.Header{Spacing: [3]float64{0.004, 0.004, 0.004}}, true},
		{volume.Header{Spacing: [3]float64{0.004, 0.004, 0.004}, Unit: "nanometer"}, false},
		{volume.Header{Spacing: [3]float64{4, 4, 4}, Unit: "micrometer"}, false},
		{volume.Header{Spacing: [3]float64{4, 4, 4}, Unit: "second"}, false},
	} {
		if err := checkBlockwiseSpec(d, tc.h); (err == nil) != tc.ok {
			t.Errorf("input %v %q: %v, want ok %v", tc.h.Spacing, tc.h.Unit, err, tc.ok)
		}
	}
}

// TestPredictBlocksPicksLevel: an OME-Zarr image whose level 0 is not at
// the checkpoint's data.target_spacing is predicted at its level that is
// (ome04's level 1: 5 × 1.6 × 1.4 mm; the target given in µm), said on
// the output; the labels take that level's grid and spacing. A target no
// level is at is refused, naming the spacings.
func TestPredictBlocksPicksLevel(t *testing.T) {
	in := filepath.Join("..", "..", "zarr", "testdata", "v2", "ome04.ome.zarr")
	runs := filepath.Join(t.TempDir(), "runs")
	predict := func(fold int, target []float64) (string, string, error) {
		ck := tinyCheckpoint(t, runs, fold, 1, func(c *config.Config) {
			c.Model.InChannels = 2
			c.Data.TargetSpacing, c.Data.SpacingUnit = target, "um"
		})
		out := filepath.Join(t.TempDir(), "pred.ome.zarr")
		stdout, _, err := runCmd(t, "predict", "--checkpoint", ck, "-i", in, "-o", out, "--block", "8", "--disable-tta", "--threads", "1")
		return out, stdout.String(), err
	}
	out, stdout, err := predict(0, []float64{5000, 1600, 1400})
	if err != nil {
		t.Fatalf("target 5000, 1600, 1400 µm: %v\n%s", err, stdout)
	}
	if !strings.Contains(stdout, "level 1 (shape [3 4 5], voxel size [5 1.6 1.4] millimeter)") || !strings.Contains(stdout, "--roi is in its voxels") {
		t.Errorf("the output does not say level 1 was read:\n%s", stdout)
	}
	if h, _ := readStore(t, out); h.Shape != [3]int{3, 4, 5} || h.Spacing != [3]float64{5, 1.6, 1.4} || h.Unit != "millimeter" {
		t.Errorf("labels: shape %v spacing %v %s, want level 1's [3 4 5] and [5 1.6 1.4] millimeter", h.Shape, h.Spacing, h.Unit)
	}
	if _, _, err := predict(1, []float64{2500, 800, 700}); err != nil {
		t.Errorf("target at level 0: %v", err)
	}
	_, _, err = predict(2, []float64{4000, 1600, 1400})
	if err == nil || !strings.Contains(err.Error(), "the input's spacing [2.5 0.8 0.7] millimeter is not") {
		t.Errorf("a target no level is at: %v, want level 0's refusal", err)
	}
}
