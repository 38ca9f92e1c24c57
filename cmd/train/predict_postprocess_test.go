package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/nifti"
	"github.com/voxtrain/voxtrain/postprocess"
)

// TestPredictPostprocessing: --postprocessing applies the plan to each
// case's labels — the result is the plain prediction with the plan's
// steps run on it, and differs from it — and a plan naming a label the
// models do not predict, or not a plan at all, is refused naming the file.
func TestPredictPostprocessing(t *testing.T) {
	runs := filepath.Join(t.TempDir(), "runs")
	ck := tinyCheckpoint(t, runs, 0, 3, nil)
	in := nnunetInputs(t)
	out := t.TempDir()
	plan := &postprocess.Plan{Format: postprocess.Format, Labels: []int{1, 2},
		Steps: []postprocess.Step{{Op: postprocess.KeepLargestOp, Labels: []int{1, 2}}, {Op: postprocess.KeepLargestOp, Labels: []int{1}}}}
	planPath := filepath.Join(out, "postprocessing.json")
	if err := plan.Write(planPath); err != nil {
		t.Fatal(err)
	}
	predict := func(dir string, args ...string) (string, error) {
		o, errb, err := runCmd(t, append([]string{"predict", "-i", in, "-o", dir, "--disable-tta", "--threads", "2", "--checkpoint", ck}, args...)...)
		return o.String() + errb.String(), err
	}
	if log, err := predict(filepath.Join(out, "plain")); err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	log, err := predict(filepath.Join(out, "pp"), "--postprocessing", planPath)
	if err != nil || !strings.Contains(log, "post-processing "+planPath+": 2 steps") {
		t.Fatalf("%v\n%s", err, log)
	}
	changed := 0
	for _, id := range []string{"hippocampus_001", "hippocampus_006"} {
		h, plain, err := nifti.ReadFloat32(filepath.Join(out, "plain", id+".nii.gz"))
		if err != nil {
			t.Fatal(err)
		}
		_, got, err := nifti.ReadFloat32(filepath.Join(out, "pp", id+".nii.gz"))
		if err != nil {
			t.Fatal(err)
		}
		want := make([]uint8, len(plain))
		for i, v := range plain {
			want[i] = uint8(v)
		}
		shape := [3]int{int(h.Dim[3]), int(h.Dim[2]), int(h.Dim[1])}
		if err := plan.Apply(want, shape); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if uint8(got[i]) != want[i] {
				t.Fatalf("%s voxel %d: %v with --postprocessing, %d by the plan applied to the plain prediction", id, i, got[i], want[i])
			}
			if got[i] != plain[i] {
				changed++
			}
		}
	}
	if changed == 0 {
		t.Error("post-processing changed no voxel: the test cannot tell it was applied")
	}

	bad := filepath.Join(out, "bad.json")
	plan.Labels, plan.Steps = []int{1, 7}, []postprocess.Step{{Op: postprocess.KeepLargestOp, Labels: []int{7}}}
	if err := plan.Write(bad); err != nil {
		t.Fatal(err)
	}
	if _, err := predict(filepath.Join(out, "bad"), "--postprocessing", bad); err == nil || !strings.Contains(err.Error(), "--postprocessing "+bad+": label 7") {
		t.Errorf("a plan for label 7 of a 3-class model: %v", err)
	}
	os.WriteFile(bad, []byte("{}"), 0o644)
	if _, err := predict(filepath.Join(out, "bad"), "--postprocessing", bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("not a plan: %v", err)
	}
}
