package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/checkpoint"
	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/internal/npy"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/nifti"
	"github.com/voxtrain/voxtrain/nn"
)

// nnunetModel is the fixture: a trained-model folder nnU-Net v2 wrote
// (testdata/nnunet_model/make_fixture.py), a transpose that is not the
// identity.
var nnunetModel = filepath.Join("testdata", "nnunet_model", "Dataset999_Tiny", "nnUNetTrainer__nnUNetPlans__3d_fullres")

// permute3 reorders a (N, C, a0, a1, a2) array's spatial axes: axis j of
// the result is axis perm[j] of the input. (nnunet.permuteKernel does the
// same to the weights; this is written apart on purpose, so that the test
// does not check the import's permutation with itself.)
func permute3(a npy.Array, perm []int) npy.Array {
	s := a.Shape[2:]
	ns := []int{s[perm[0]], s[perm[1]], s[perm[2]]}
	nc := a.Shape[0] * a.Shape[1]
	n := s[0] * s[1] * s[2]
	out := make([]float32, len(a.Data))
	stride := [3]int{s[1] * s[2], s[2], 1}
	for c := 0; c < nc; c++ {
		i := 0
		for x := 0; x < ns[0]; x++ {
			for y := 0; y < ns[1]; y++ {
				for z := 0; z < ns[2]; z++ {
					var idx [3]int
					idx[perm[0]], idx[perm[1]], idx[perm[2]] = x, y, z
					out[c*n+i] = a.Data[c*n+idx[0]*stride[0]+idx[1]*stride[1]+idx[2]*stride[2]]
					i++
				}
			}
		}
	}
	return npy.Array{Shape: append(a.Shape[:2:2], ns...), Data: out}
}

// TestImportNNUNet: import-nnunet turns nnU-Net's trained-model folder into
// a voxtrain run whose network computes what nnU-Net's computed, every
// deep-supervision output (the fixture's io.npz, made by nnU-Net's own
// PlainConvUNet), on the same input in the files' axes rather than
// nnU-Net's transposed ones; the run predicts with predict --model-dir.
func TestImportNNUNet(t *testing.T) {
	noNNUNetEnvironment(t)
	out := t.TempDir()
	data := testutil.DemoDir(t)
	o, errb, err := runCmd(t, "import-nnunet", nnunetModel, "--data", data, "-o", out)
	if err != nil {
		t.Fatalf("import-nnunet: %v\n%s\n%s", err, o, errb)
	}
	exp := filepath.Join(out, "Dataset999_Tiny_3d_fullres")
	if !strings.Contains(o.String(), "imported 3d_fullres (Dataset999_Tiny, 1 folds) into "+exp) {
		t.Errorf("import-nnunet's output:\n%s", o)
	}
	checkImportedNetwork(t, exp, filepath.Join("testdata", "nnunet_model", "io.npz"))

	// The run predicts a case as nnU-Net's predictor did with the model
	// (the fixture's predicted/: same preprocessing, here a resampling to
	// the plans' 3 mm across W, same sliding window, same export): the
	// labels agree on all but a few voxels and the probabilities on
	// average to 1e-3. They are not bit-identical: nnU-Net 2.8 blends the
	// windows in float16 (its Gaussian map and both accumulators), which
	// rounds the voxels only patch corners reach (the volume's corners)
	// where voxtrain blends in float32.
	checkImportedPrediction(t, exp, filepath.Join("testdata", "nnunet_model", "predicted"), data)
	// checkpoint_best.pth became the best checkpoint, with nnU-Net's EMA
	// pseudo Dice as its metric and its own weights; final is last.
	ck := filepath.Join(exp, "fold_0", "run_0", "checkpoints")
	best, err := checkpoint.Best(ck)
	if err != nil || best.Metric == nil || *best.Metric != 0.625 || best.Epoch != 2 {
		t.Fatalf("the imported best checkpoint: %+v, %v", best, err)
	}
	last, err := checkpoint.Latest(ck)
	if err != nil || last.Epoch != 3 || last.Dir == best.Dir {
		t.Errorf("the imported last checkpoint: %+v, %v (best %s)", last, err, best.Dir)
	}
	// Its checkpoints hold no optimiser state: a resume says so and what
	// to do instead.
	if _, _, err := runCmd(t, "--config", filepath.Join(exp, "fold_0", "run_0", "config.yaml"), "--resume", "auto", "--epochs", "4", "--threads", "2", "--device", "cpu"); err == nil ||
		!strings.Contains(err.Error(), "holds the weights only, no optimiser state") || !strings.Contains(err.Error(), "--init-weights "+last.Dir) {
		t.Errorf("resuming an imported run: %v", err)
	}
	// Imported twice: refused, nothing written over.
	if _, _, err := runCmd(t, "import-nnunet", nnunetModel, "--data", data, "-o", out); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("a second import: %v", err)
	}
}

// TestImportNNUNetRefuses: what the import cannot map is refused, saying
// what and why.
func TestImportNNUNetRefuses(t *testing.T) {
	noNNUNetEnvironment(t)
	data := testutil.DemoDir(t)
	edit := func(t *testing.T, file, old, new string) string {
		t.Helper()
		dir := filepath.Join(t.TempDir(), "nnUNetTrainer__nnUNetPlans__3d_fullres")
		if err := os.CopyFS(dir, os.DirFS(nnunetModel)); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, file)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), old) {
			t.Fatalf("%s lacks %q", file, old)
		}
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(string(b), old, new)), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	for _, c := range []struct {
		name string
		dir  string
		args []string
		want string
	}{
		{"another network", edit(t, "plans.json", "unet.PlainConvUNet", "unet.ResidualUNet"), nil, "network is dynamic_network_architectures.architectures.unet.ResidualUNet: voxtrain builds nnU-Net's PlainConvUNet and ResidualEncoderUNet only"},
		{"residual encoder without its blocks", edit(t, "plans.json", "unet.PlainConvUNet", "unet.ResidualEncoderUNet"), nil, "n_blocks_per_stage []: want one entry for each of the 3 stages (a ResidualEncoderUNet)"},
		{"configuration", nnunetModel, []string{"--configuration", "2d"}, `plans.json has no configuration "2d" (it has 3d_fullres)`},
		// Plans that do not describe the checkpoint's network: a 2-D patch
		// over 3-D weights.
		{"plans and weights disagree", edit(t, "plans.json", `"patch_size": [
                8,
                16,
                16
            ],`, `"patch_size": [16, 16],`), nil, "in the network the plans describe"},
		{"fold", nnunetModel, []string{"--fold", "3"}, "--fold 3: no "},
		{"data", nnunetModel, []string{"--data", filepath.Join(t.TempDir(), "none")}, "--data"},
	} {
		args := append([]string{"import-nnunet", c.dir, "--data", data, "-o", t.TempDir()}, c.args...)
		if _, _, err := runCmd(t, args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if _, _, err := runCmd(t, "import-nnunet", nnunetModel, "-o", t.TempDir()); err == nil || !strings.Contains(err.Error(), "--data is required") {
		t.Errorf("no --data: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "splits_final.json")
	os.WriteFile(bad, []byte(`{"train": []}`), 0o644)
	if _, _, err := runCmd(t, "import-nnunet", nnunetModel, "--data", data, "-o", t.TempDir(), "--splits", bad); err == nil ||
		!strings.Contains(err.Error(), "not nnU-Net's splits_final.json") {
		t.Errorf("bad --splits: %v", err)
	}
}

// TestImportNNUNetSplits: --splits copies nnU-Net's splits_final.json into
// the experiment, which the runs' configs name with its fold count.
func TestImportNNUNetSplits(t *testing.T) {
	noNNUNetEnvironment(t)
	splits := filepath.Join(t.TempDir(), "splits_final.json")
	text := `[{"train": ["hippocampus_001", "hippocampus_006"], "val": ["hippocampus_011"]}, {"train": ["hippocampus_011"], "val": ["hippocampus_001", "hippocampus_006"]}]`
	if err := os.WriteFile(splits, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if o, errb, err := runCmd(t, "import-nnunet", nnunetModel, "--data", testutil.DemoDir(t), "-o", out, "--splits", splits); err != nil {
		t.Fatalf("import-nnunet --splits: %v\n%s\n%s", err, o, errb)
	}
	exp := filepath.Join(out, "Dataset999_Tiny_3d_fullres")
	if b, err := os.ReadFile(filepath.Join(exp, "splits_final.json")); err != nil || string(b) != text {
		t.Errorf("the experiment's splits_final.json: %v\n%s", err, b)
	}
	cfg, err := config.Load(filepath.Join(exp, "fold_0", "run_0", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Data.SplitsFile != filepath.Join(exp, "splits_final.json") || cfg.Data.NumFolds != 2 {
		t.Errorf("the run's data.splits_file %q, num_folds %d", cfg.Data.SplitsFile, cfg.Data.NumFolds)
	}
}

// TestImportNNUNetEnvironment: with nnU-Net's environment set, the raw
// dataset is $nnUNet_raw/DATASET and the splits
// $nnUNet_preprocessed/DATASET/splits_final.json, as nnU-Net finds them.
func TestImportNNUNetEnvironment(t *testing.T) {
	root := t.TempDir()
	raw := filepath.Join(root, "raw", "Dataset999_Tiny")
	pre := filepath.Join(root, "pre", "Dataset999_Tiny")
	for _, d := range []string{raw, pre} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	text := `[{"train": ["a"], "val": ["b"]}, {"train": ["b"], "val": ["a"]}, {"train": ["a"], "val": ["c"]}]`
	if err := os.WriteFile(filepath.Join(pre, "splits_final.json"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("nnUNet_raw", filepath.Join(root, "raw"))
	t.Setenv("nnUNet_preprocessed", filepath.Join(root, "pre"))
	out := t.TempDir()
	if o, errb, err := runCmd(t, "import-nnunet", nnunetModel, "-o", out); err != nil {
		t.Fatalf("import-nnunet with nnU-Net's environment: %v\n%s\n%s", err, o, errb)
	}
	cfg, err := config.Load(filepath.Join(out, "Dataset999_Tiny_3d_fullres", "fold_0", "run_0", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Data.Dataset != raw || cfg.Data.NumFolds != 3 {
		t.Errorf("data.dataset %q (want %q), num_folds %d (want the splits' 3)", cfg.Data.Dataset, raw, cfg.Data.NumFolds)
	}
}

// TestImportNNUNetValidation: a fold's validation folder nnU-Net wrote
// comes along into the run's validation/, so find-best gathers the
// imported folds as voxtrain's own (here fold 0 alone, --folds 0).
func TestImportNNUNetValidation(t *testing.T) {
	noNNUNetEnvironment(t)
	model := filepath.Join(t.TempDir(), "nnUNetTrainer__nnUNetPlans__3d_fullres")
	if err := os.CopyFS(model, os.DirFS(nnunetModel)); err != nil {
		t.Fatal(err)
	}
	val := filepath.Join(model, "fold_0", "validation")
	if err := os.CopyFS(val, os.DirFS(filepath.Join("testdata", "nnunet_model", "predicted"))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(val, "summary.json"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	o, errb, err := runCmd(t, "import-nnunet", model, "--data", testutil.DemoDir(t), "-o", out)
	if err != nil {
		t.Fatalf("import-nnunet: %v\n%s\n%s", err, o, errb)
	}
	exp := filepath.Join(out, "Dataset999_Tiny_3d_fullres")
	got := testutil.DirNames(t, filepath.Join(exp, "fold_0", "run_0", "validation"))
	if want := []string{"hippocampus_001.nii.gz", "hippocampus_001.npz", "summary.json"}; !slices.Equal(got, want) {
		t.Errorf("the run's validation/ holds %v, want %v", got, want)
	}
	fb := filepath.Join(t.TempDir(), "fb")
	o, errb, err = runCmd(t, "find-best", "--cv", "nnunet="+exp, "--folds", "0", "-o", fb)
	if err != nil || !strings.Contains(o.String(), "nnunet: foreground mean Dice") || !strings.Contains(o.String(), "over 1 cases") {
		t.Errorf("find-best on the imported folds: %v\n%s\n%s", err, o, errb)
	}
}

// noNNUNetEnvironment unsets nnU-Net's variables for the test: a
// developer's own must not choose the dataset or splits.
func noNNUNetEnvironment(t *testing.T) {
	t.Setenv("nnUNet_raw", "")
	t.Setenv("nnUNet_preprocessed", "")
}

// checkImportedNetwork loads the imported run's last checkpoint into the
// network its config builds and holds its outputs on ioPath's input to
// nnU-Net's network's (every deep-supervision output), the arrays put back
// from nnU-Net's transposed axes (the fixture's transpose_backward [1, 2,
// 0]) into the files'; a 2d model's (N, C, a1, a2) arrays are one slice
// along transposed axis 0.
func checkImportedNetwork(t *testing.T, exp, ioPath string) {
	t.Helper()
	cfg, err := config.Load(filepath.Join(exp, "fold_0", "run_0", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dev := cpu.New(cpu.Options{Threads: 2})
	m, err := nn.NewUNet(dev, cfg.Model, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	want, err := nn.ExportParams(dev, m.Params())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.Load(filepath.Join(exp, "fold_0", "run_0", "checkpoints", "last"), want, nil); err != nil {
		t.Fatal(err)
	}
	if err := nn.ImportParams(dev, m.Params(), want); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(ioPath)
	if err != nil {
		t.Fatal(err)
	}
	io, err := npy.ReadNPZ(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	as3D := func(a npy.Array) npy.Array {
		if len(a.Shape) == 4 {
			a.Shape = []int{a.Shape[0], a.Shape[1], 1, a.Shape[2], a.Shape[3]}
		}
		return a
	}
	tb := []int{1, 2, 0} // the plans' transpose_backward
	x := permute3(as3D(io["input"]), tb)
	ws, err := m.NewWorkspace(1, [3]int{x.Shape[2], x.Shape[3], x.Shape[4]}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Free()
	xd := dev.Alloc(nn.Shape(x.Shape))
	if err := dev.Upload(dev.ComputeStream(), xd, x.Data); err != nil {
		t.Fatal(err)
	}
	outs := m.Forward(ws, xd)
	if len(outs) != 2 {
		t.Fatalf("%d outputs, nnU-Net's network gave 2", len(outs))
	}
	for i, od := range outs {
		w := permute3(as3D(io[fmt.Sprintf("output%d", i)]), tb)
		nc := dev.Alloc(nn.Shape(w.Shape))
		dev.NDHWCToNCDHW(od, nc)
		got := make([]float32, len(w.Data))
		if err := dev.Download(dev.ComputeStream(), got, nc); err != nil {
			t.Fatal(err)
		}
		if rel := testutil.RelativeL2(got, w.Data); rel > 1e-5 {
			t.Errorf("output %d %v: relative L2 error %.2e against nnU-Net's network", i, w.Shape, rel)
		}
	}
}

// checkImportedPrediction predicts the demo case hippocampus_001 with the
// imported experiment exp (no mirroring, as the fixture's nnU-Net
// prediction in ref) and holds labels and probabilities to nnU-Net's.
func checkImportedPrediction(t *testing.T, exp, ref, data string) {
	t.Helper()
	pred := filepath.Join(t.TempDir(), "hippocampus_001.nii.gz")
	if o, errb, err := runCmd(t, "predict", "--model-dir", exp, "-i", filepath.Join(data, "imagesTr", "hippocampus_001.nii.gz"),
		"-o", pred, "--disable-tta", "--save-probabilities", "--threads", "2"); err != nil {
		t.Fatalf("predict --model-dir: %v\n%s\n%s", err, o, errb)
	}
	_, lv, err := nifti.ReadFloat32(pred)
	if err != nil {
		t.Fatal(err)
	}
	_, ln, err := nifti.ReadFloat32(filepath.Join(ref, "hippocampus_001.nii.gz"))
	if err != nil {
		t.Fatal(err)
	}
	pv := readProbs(t, strings.TrimSuffix(pred, ".nii.gz")+".npz")
	pn := readProbs(t, filepath.Join(ref, "hippocampus_001.npz"))
	if len(lv) != len(ln) || !slices.Equal(pv.Shape, pn.Shape) {
		t.Fatalf("voxtrain's prediction: %d voxels, probabilities %v; nnU-Net's %d, %v", len(lv), pv.Shape, len(ln), pn.Shape)
	}
	same := 0
	for i := range lv {
		if lv[i] == ln[i] {
			same++
		}
	}
	var sum float64
	for i := range pv.Data {
		sum += math.Abs(float64(pv.Data[i] - pn.Data[i]))
	}
	agree, mean := float64(same)/float64(len(lv)), sum/float64(len(pv.Data))
	t.Logf("%s against nnU-Net's predictor: labels agree on %.4f of the voxels, mean |Δp| %.2e", filepath.Base(exp), agree, mean)
	if agree < 0.995 || mean > 1e-3 {
		t.Errorf("%s against nnU-Net's predictor: labels agree on %.4f of the voxels (want ≥ 0.995), mean |Δp| %.2e (want ≤ 1e-3)", filepath.Base(exp), agree, mean)
	}
}

// TestImportNNUNet2D: a 2d configuration imports too: its 2-D kernels
// become voxtrain's 2d network's (one voxel deep across the slices, the
// files' W here), which computes nnU-Net's 2-D network's outputs; the
// planned target_spacing keeps each case's own spacing across the slices
// (nnU-Net's 2d preprocessing) and resamples in-plane to the plans' 1.25 ×
// 0.8, and the run predicts the demo case as nnU-Net's predictor did.
func TestImportNNUNet2D(t *testing.T) {
	noNNUNetEnvironment(t)
	out := t.TempDir()
	data := testutil.DemoDir(t)
	model := filepath.Join("testdata", "nnunet_model", "Dataset999_Tiny", "nnUNetTrainer__nnUNetPlans__2d")
	o, errb, err := runCmd(t, "import-nnunet", model, "--data", data, "-o", out)
	if err != nil {
		t.Fatalf("import-nnunet: %v\n%s\n%s", err, o, errb)
	}
	exp := filepath.Join(out, "Dataset999_Tiny_2d")
	if !strings.Contains(o.String(), "imported 2d (Dataset999_Tiny, 1 folds) into "+exp) {
		t.Errorf("import-nnunet's output:\n%s", o)
	}
	cfg, err := config.Load(filepath.Join(exp, "fold_0", "run_0", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if ts := cfg.Data.TargetSpacing; !slices.Equal(ts, []float64{1.25, 0.8, 0}) || cfg.Train.PatchSize != [3]int{16, 16, 1} {
		t.Errorf("imported 2d config: target_spacing %v, patch %v; want [1.25 0.8 0] (W kept), [16 16 1]", ts, cfg.Train.PatchSize)
	}
	checkImportedNetwork(t, exp, filepath.Join("testdata", "nnunet_model", "io2d.npz"))
	checkImportedPrediction(t, exp, filepath.Join("testdata", "nnunet_model", "predicted2d"), data)
}

// TestImportNNUNetLowres: the first stage of nnU-Net's cascade, a
// 3d_lowres model (its spacing coarser than 3d_fullres's along every axis,
// by different factors), imports as a 3-D run on its coarser grid: the
// network computes nnU-Net's outputs and the run predicts the demo case as
// nnU-Net's predictor did (resampled to the low-resolution grid, predicted
// there, resampled back). The cascade's second stage is refused, naming
// the cascade.
func TestImportNNUNetLowres(t *testing.T) {
	noNNUNetEnvironment(t)
	out := t.TempDir()
	data := testutil.DemoDir(t)
	model := filepath.Join("testdata", "nnunet_model", "Dataset999_Tiny", "nnUNetTrainer__nnUNetPlans__3d_lowres")
	o, errb, err := runCmd(t, "import-nnunet", model, "--data", data, "-o", out)
	if err != nil {
		t.Fatalf("import-nnunet: %v\n%s\n%s", err, o, errb)
	}
	exp := filepath.Join(out, "Dataset999_Tiny_3d_lowres")
	if !strings.Contains(o.String(), "imported 3d_lowres (Dataset999_Tiny, 1 folds) into "+exp) {
		t.Errorf("import-nnunet's output:\n%s", o)
	}
	cfg, err := config.Load(filepath.Join(exp, "fold_0", "run_0", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// nnU-Net's (W, D, H) spacing 3.6 x 1.25 x 1.5 and patch 8 x 16 x 16
	// (transpose_forward [2, 0, 1]) in the files' (D, H, W).
	if ts := cfg.Data.TargetSpacing; !slices.Equal(ts, []float64{1.25, 1.5, 3.6}) || cfg.Train.PatchSize != [3]int{16, 16, 8} {
		t.Errorf("imported 3d_lowres config: target_spacing %v, patch %v; want [1.25 1.5 3.6], [16 16 8]", ts, cfg.Train.PatchSize)
	}
	checkImportedNetwork(t, exp, filepath.Join("testdata", "nnunet_model", "iolowres.npz"))
	checkImportedPrediction(t, exp, filepath.Join("testdata", "nnunet_model", "predictedlowres"), data)

	_, _, err = runCmd(t, "import-nnunet", model, "--data", data, "-o", t.TempDir(), "--configuration", "3d_cascade_fullres")
	if err == nil || !strings.Contains(err.Error(), "cascade") {
		t.Errorf("importing the cascade's second stage: %v, want an error naming the cascade", err)
	}
}

// TestImportNNUNetResEnc: a model of nnU-Net's residual-encoder preset
// (nnUNetResEncUNetMPlans: a ResidualEncoderUNet with a stem, residual
// blocks whose skips pool and project, one decoder conv per stage)
// imports as model.encoder residual; the network computes nnU-Net's
// outputs and the run predicts the demo case as nnU-Net's predictor did.
func TestImportNNUNetResEnc(t *testing.T) {
	noNNUNetEnvironment(t)
	out := t.TempDir()
	data := testutil.DemoDir(t)
	model := filepath.Join("testdata", "nnunet_model", "Dataset999_Tiny", "nnUNetTrainer__nnUNetResEncUNetMPlans__3d_fullres")
	o, errb, err := runCmd(t, "import-nnunet", model, "--data", data, "-o", out)
	if err != nil {
		t.Fatalf("import-nnunet: %v\n%s\n%s", err, o, errb)
	}
	exp := filepath.Join(out, "Dataset999_Tiny_nnUNetResEncUNetMPlans_3d_fullres")
	if !strings.Contains(o.String(), "into "+exp) {
		t.Errorf("import-nnunet's output:\n%s", o)
	}
	cfg, err := config.Load(filepath.Join(exp, "fold_0", "run_0", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if m := cfg.Model; !m.Residual() || !slices.Equal(m.BlocksPerLevel, []int{1, 2, 2}) || m.DecoderConvsPerStage() != 1 {
		t.Errorf("imported ResEnc config: encoder %q, blocks_per_level %v, decoder convs %d; want residual, [1 2 2], 1",
			m.Encoder, m.BlocksPerLevel, m.DecoderConvsPerStage())
	}
	checkImportedNetwork(t, exp, filepath.Join("testdata", "nnunet_model", "ioresenc.npz"))
	checkImportedPrediction(t, exp, filepath.Join("testdata", "nnunet_model", "predictedresenc"), data)
}

// TestImportNNUNetRegions: a model of nnU-Net regions (sigmoid heads, one
// per region: the demo's "whole" = {1, 2} and "posterior" = {2}) imports
// as voxtrain's multi-label targets with dataset.json's
// regions_class_order and Dice + BCE; the network computes nnU-Net's
// logits and the run predicts the demo case as nnU-Net's predictor did:
// labels painted by regions_class_order, the regions' probabilities.
func TestImportNNUNetRegions(t *testing.T) {
	noNNUNetEnvironment(t)
	out := t.TempDir()
	data := testutil.DemoDir(t)
	model := filepath.Join("testdata", "nnunet_model", "Dataset998_TinyRegions", "nnUNetTrainer__nnUNetPlans__3d_fullres")
	if o, errb, err := runCmd(t, "import-nnunet", model, "--data", data, "-o", out); err != nil {
		t.Fatalf("import-nnunet: %v\n%s\n%s", err, o, errb)
	}
	exp := filepath.Join(out, "Dataset998_TinyRegions_3d_fullres")
	cfg, err := config.Load(filepath.Join(exp, "fold_0", "run_0", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if m := cfg.Model; !m.MultiLabel() || m.NumClasses != 2 || !slices.Equal(m.RegionsClassOrder, []int{1, 2}) || cfg.Loss.Name != "dice_bce" {
		t.Errorf("imported region config: targets %q, num_classes %d, regions_class_order %v, loss %s; want multi_label, 2, [1 2], dice_bce",
			m.Targets, m.NumClasses, m.RegionsClassOrder, cfg.Loss.Name)
	}
	checkImportedNetwork(t, exp, filepath.Join("testdata", "nnunet_model", "ioregions.npz"))
	checkImportedPrediction(t, exp, filepath.Join("testdata", "nnunet_model", "predictedregions"), data)
}

// TestImportNNUNetIgnoreLabel: a dataset.json with nnU-Net's ignore label
// imports with loss.ignore_label set and no class for it, so that the run
// fine-tunes (the trainer refuses a dataset's ignore label the config does
// not name).
func TestImportNNUNetIgnoreLabel(t *testing.T) {
	noNNUNetEnvironment(t)
	dir := filepath.Join(t.TempDir(), "nnUNetTrainer__nnUNetPlans__3d_fullres")
	if err := os.CopyFS(dir, os.DirFS(nnunetModel)); err != nil {
		t.Fatal(err)
	}
	dj := filepath.Join(dir, "dataset.json")
	b, err := os.ReadFile(dj)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dj, []byte(strings.Replace(string(b), `"b": 2`, `"b": 2, "ignore": 3`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if o, errb, err := runCmd(t, "import-nnunet", dir, "--data", testutil.DemoDir(t), "-o", out); err != nil {
		t.Fatalf("import-nnunet: %v\n%s\n%s", err, o, errb)
	}
	cfg, err := config.Load(filepath.Join(out, "Dataset999_Tiny_3d_fullres", "fold_0", "run_0", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Model.NumClasses != 3 || cfg.Loss.Ignore() != 3 {
		t.Errorf("num_classes %d, ignore_label %d; want 3 and 3", cfg.Model.NumClasses, cfg.Loss.Ignore())
	}
	// Regions with an ignore label: the multi-label ignore byte.
	rdir := filepath.Join(t.TempDir(), "nnUNetTrainer__nnUNetPlans__3d_fullres")
	regions := filepath.Join("testdata", "nnunet_model", "Dataset998_TinyRegions", "nnUNetTrainer__nnUNetPlans__3d_fullres")
	if err := os.CopyFS(rdir, os.DirFS(regions)); err != nil {
		t.Fatal(err)
	}
	rj := filepath.Join(rdir, "dataset.json")
	if b, err = os.ReadFile(rj); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rj, []byte(strings.Replace(string(b), `"background": 0,`, `"background": 0, "ignore": 3,`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out = t.TempDir()
	if o, errb, err := runCmd(t, "import-nnunet", rdir, "--data", testutil.DemoDir(t), "-o", out); err != nil {
		t.Fatalf("import-nnunet (regions): %v\n%s\n%s", err, o, errb)
	}
	if cfg, err = config.Load(filepath.Join(out, "Dataset998_TinyRegions_3d_fullres", "fold_0", "run_0", "config.yaml")); err != nil {
		t.Fatal(err)
	}
	if !cfg.Model.MultiLabel() || cfg.Model.NumClasses != 2 || cfg.Loss.Ignore() != 255 {
		t.Errorf("regions with an ignore label: targets %q, num_classes %d, ignore_label %d; want multi_label, 2, 255", cfg.Model.Targets, cfg.Model.NumClasses, cfg.Loss.Ignore())
	}
}
