package postprocess

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/evaluation"
	"github.com/voxtrain/voxtrain/nifti"
)

func idx(s [3]int, d, h, w int) int { return (d*s[1]+h)*s[2] + w }

func TestComponentsAre26Connected(t *testing.T) {
	s := [3]int{3, 3, 5}
	m := make([]bool, 45)
	m[idx(s, 0, 0, 0)] = true
	m[idx(s, 1, 1, 1)] = true // corner contact: same component
	m[idx(s, 2, 2, 2)] = true
	m[idx(s, 0, 0, 4)] = true // two voxels from (2, 2, 2): its own
	comp, sizes := Components(m, s)
	if len(sizes) != 3 || sizes[1] != 3 || sizes[2] != 1 {
		t.Fatalf("sizes %v, want [0 3 1]", sizes)
	}
	if comp[idx(s, 2, 2, 2)] != comp[idx(s, 0, 0, 0)] || comp[idx(s, 0, 0, 4)] == comp[idx(s, 0, 0, 0)] || comp[idx(s, 0, 1, 0)] != 0 {
		t.Errorf("components %v", comp)
	}
	keep := KeepLargest(m, s)
	if !keep[idx(s, 1, 1, 1)] || keep[idx(s, 0, 0, 4)] {
		t.Errorf("keep %v", keep)
	}
}

// TestKeepLargestKeepsTies: components of the largest size all stay, as
// acvl_utils keeps every id whose size equals the maximum.
func TestKeepLargestKeepsTies(t *testing.T) {
	s := [3]int{1, 1, 7}
	m := []bool{true, true, false, true, true, false, true}
	k := KeepLargest(m, s)
	want := []bool{true, true, false, true, true, false, false}
	for i := range want {
		if k[i] != want[i] {
			t.Fatalf("keep %v, want %v", k, want)
		}
	}
	if k := KeepLargest(make([]bool, 7), s); k[0] {
		t.Error("empty mask grew")
	}
}

func TestRemoveAllButLargestPerLabelAndTogether(t *testing.T) {
	s := [3]int{1, 1, 9}
	seg := []uint8{1, 1, 2, 0, 1, 0, 2, 2, 2}
	one := append([]uint8(nil), seg...)
	if err := RemoveAllButLargest(one, s, []int{1}); err != nil {
		t.Fatal(err)
	}
	if string(one) != string([]uint8{1, 1, 2, 0, 0, 0, 2, 2, 2}) {
		t.Errorf("label 1 alone: %v", one)
	}
	both := append([]uint8(nil), seg...)
	RemoveAllButLargest(both, s, []int{1, 2}) // {0,1,2} is 3 voxels, {6,7,8} 3: a tie, both kept
	if string(both) != string([]uint8{1, 1, 2, 0, 0, 0, 2, 2, 2}) {
		t.Errorf("together: %v", both)
	}
	if err := RemoveAllButLargest(seg, [3]int{1, 1, 8}, []int{1}); err == nil {
		t.Error("a shape of the wrong size accepted")
	}
}

func TestLoadRefusesBadPlans(t *testing.T) {
	dir := t.TempDir()
	for body, want := range map[string]string{
		`{"format": "x", "steps": []}`:                                                             `format "x"`,
		`{"format": "` + Format + `"}`:                                                             "no \"steps\"",
		`{"format": "` + Format + `", "steps": [{"op": "dilate", "labels": [1]}]}`:                 `steps[0]: op "dilate"`,
		`{"format": "` + Format + `", "steps": [{"op": "keep_largest_component", "labels": [0]}]}`: "steps[0]: labels [0]",
		`{"format": `: "parse",
		`{"format": "` + Format + `", "steps": [{"op": "keep_largest_component", "labels": [2], "region": "(2, 3)"}]}`:    "steps[0]: region (2, 3): labels [2], want its label values [2 3]",
		`{"format": "` + Format + `", "steps": [{"op": "keep_largest_component", "labels": [2, 3], "region": "(2, x)"}]}`: `steps[0]: region: key "(2, x)"`,
		`{"format": "` + Format + `", "steps": [{"op": "keep_largest_component", "labels": [0], "region": "(0,)"}]}`:      "steps[0]: region (0,): (0,): background",
	} {
		p := filepath.Join(dir, "postprocessing.json")
		os.WriteFile(p, []byte(body), 0o644)
		_, err := Load(p)
		if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error naming the file and %q", body, err, want)
		}
	}
}

// TestPlanRoundTripAndApplyFilesKeepsHeader: a written plan loads back and
// post-processes a file into another folder with the input's header (an
// int16 file with scaling stays one), never into the input's own folder.
func TestPlanRoundTripAndApplyFilesKeepsHeader(t *testing.T) {
	dir := t.TempDir()
	p := &Plan{Format: Format, Labels: []int{1}, Steps: []Step{{Op: KeepLargestOp, Labels: []int{1}}}}
	path := filepath.Join(dir, "pp.json")
	if err := p.Write(path); err != nil {
		t.Fatal(err)
	}
	q, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := nifti.NewHeader([]int{5, 1, 1}, nifti.Int16)
	h.SclSlope, h.SclInter = 1, -10
	h.Descrip = "mine"
	in := filepath.Join(dir, "in", "c.nii.gz")
	os.MkdirAll(filepath.Dir(in), 0o755)
	if err := nifti.WriteFloat32(in, h, []float32{1, 1, 0, 1, 0}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.ApplyFiles([]string{in}, filepath.Dir(in), nil); err == nil {
		t.Fatal("wrote into the input's folder")
	}
	out, err := q.ApplyFiles([]string{in}, filepath.Join(dir, "out"), nil)
	if err != nil {
		t.Fatal(err)
	}
	oh, err := nifti.ReadHeader(out[0])
	if err != nil {
		t.Fatal(err)
	}
	if oh.Datatype != nifti.Int16 || oh.SclInter != -10 || oh.Descrip != "mine" {
		t.Errorf("header %v slope %v %q", oh.Datatype, oh.SclSlope, oh.Descrip)
	}
	lf, err := evaluation.ReadLabelFile(out[0])
	if err != nil {
		t.Fatal(err)
	}
	if string(lf.Labels) != string([]uint8{1, 1, 0, 0, 0}) {
		t.Errorf("labels %v", lf.Labels)
	}
}

// TestLoadReadsOldPlansAndRegionSteps: a plan written before regions (no
// region fields) loads and applies as it did; a region step loads with its
// region, may list background as its region does, and applies over the
// union of its labels, the removed voxels becoming background.
func TestLoadReadsOldPlansAndRegionSteps(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "old.json")
	os.WriteFile(old, []byte(`{"format": "voxtrain-postprocessing-1", "labels": [1, 2], "label_names": {"1": "a"},
 "steps": [{"op": "keep_largest_component", "labels": [1, 2]}],
 "decisions": [{"op": "keep_largest_component", "labels": [1, 2], "criterion": "foreground_mean", "dice_before": 0.5, "dice_after": null, "kept": true, "worse_labels": [2]}],
 "input_folder": {"foreground_mean_dice": 0.5, "mean_dice": {"1": 0.5, "2": null}}}`), 0o644)
	p, err := Load(old)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Steps) != 1 || p.Steps[0].Region != "" || p.Regions != nil || p.Decisions[0].WorseLabels[0] != 2 {
		t.Errorf("old plan read as %+v", p)
	}
	seg := []uint8{1, 2, 0, 2, 0, 0}
	if err := p.Apply(seg, [3]int{1, 1, 6}); err != nil || string(seg) != string([]uint8{1, 2, 0, 0, 0, 0}) {
		t.Errorf("old plan applied: %v, %v", seg, err)
	}

	r := RegionStep(evaluation.Region{Labels: []int{3, 2, 3}, Name: "core"})
	if r.Region != "(3, 2, 3)" || fmt.Sprint(r.Labels) != "[2 3]" || r.Name != "core" {
		t.Errorf("RegionStep: %+v", r)
	}
	plan := &Plan{Format: Format, Labels: []int{1, 2, 3}, Regions: []string{"(3, 2, 3)", "(0, 1)"},
		Steps: []Step{r, RegionStep(evaluation.Region{Labels: []int{0, 1}})}}
	path := filepath.Join(dir, "regions.json")
	if err := plan.Write(path); err != nil {
		t.Fatal(err)
	}
	q, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(q.Steps, plan.Steps) || fmt.Sprint(q.PredictedLabels()) != "[1 2 3]" {
		t.Errorf("read back %+v, labels %v", q.Steps, q.PredictedLabels())
	}
	// Core (2, 3): voxels 1..2 are 2, voxel 4 is 1: voxel 4 (a 3) goes to
	// background, not to the edema around it. Then (0, 1), background
	// included: voxels 3..6 are 4, voxel 0 is 1: voxel 0 (a 1) goes.
	seg = []uint8{1, 2, 3, 1, 3, 1, 1}
	if err := q.Apply(seg, [3]int{1, 1, 7}); err != nil || string(seg) != string([]uint8{0, 2, 3, 1, 0, 1, 1}) {
		t.Errorf("region plan applied: %v, %v", seg, err)
	}
}
