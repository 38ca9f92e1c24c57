package evaluation

import (
	"encoding/json"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/metrics"
)

// TestRegionKeys: keys as Python's str() spells them, and back as
// key_to_label_or_region reads them.
func TestRegionKeys(t *testing.T) {
	for _, tc := range []struct {
		r   Region
		key string
	}{
		{Region{Labels: []int{1, 2, 3}}, "(1, 2, 3)"},
		{Region{Labels: []int{3, 2}}, "(3, 2)"},
		{Region{Labels: []int{3}}, "(3,)"},
		{Region{Labels: []int{3}, Scalar: true}, "3"},
		{Region{Labels: []int{10, 200}}, "(10, 200)"},
	} {
		if k := tc.r.Key(); k != tc.key {
			t.Errorf("%+v: key %q, want %q", tc.r, k, tc.key)
		}
		back, err := ParseRegionKey(tc.key)
		if err != nil || !slices.Equal(back.Labels, tc.r.Labels) || back.Scalar != tc.r.Scalar {
			t.Errorf("%q read back as %+v, %v", tc.key, back, err)
		}
	}
	for _, bad := range []string{"(1, x)", "()", "abc"} {
		if _, err := ParseRegionKey(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%q: %v, want an error naming it", bad, err)
		}
	}
}

// TestRegionMetricsMatchMasks: a region's counts from the joint histogram
// (after Ignore) are those of np.isin masks counted voxel by voxel, and
// its HD95 that of the masks.
func TestRegionMetricsMatchMasks(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	shape := [3]int{4, 5, 6}
	n := shape[0] * shape[1] * shape[2]
	pred, ref := make([]uint8, n), make([]uint8, n)
	for i := range pred {
		pred[i], ref[i] = uint8(rng.Intn(5)), uint8(rng.Intn(6)) // 5: ignore
	}
	p, err := CountPairs(pred, ref)
	if err != nil {
		t.Fatal(err)
	}
	p.Ignore(5)
	spacing := [3]float64{2, 1, 0.5}
	for _, r := range []Region{{Labels: []int{1, 2, 3}}, {Labels: []int{3, 2}}, {Labels: []int{4}}, {Labels: []int{0, 4}}, {Labels: []int{2}, Scalar: true}, {Labels: []int{2, 2, 5}}} {
		in := func(v uint8) bool { return slices.Contains(r.Labels, int(v)) }
		var tp, fp, fn, tn int64
		a, b := make([]bool, n), make([]bool, n)
		for i := range pred {
			a[i], b[i] = in(pred[i]), in(ref[i]) && ref[i] != 5
			if ref[i] == 5 {
				continue
			}
			switch {
			case a[i] && b[i]:
				tp++
			case a[i]:
				fp++
			case b[i]:
				fn++
			default:
				tn++
			}
		}
		m := p.RegionMetrics(r)
		if m.TP != float64(tp) || m.FP != float64(fp) || m.FN != float64(fn) || m.TN != float64(tn) {
			t.Errorf("region %s: %+v, want TP %d FP %d FN %d TN %d", r.Key(), m, tp, fp, fn, tn)
		}
		h, err := HD95Region(pred, ref, r, 5, shape, spacing)
		if err != nil {
			t.Fatal(err)
		}
		w, _ := metrics.HD95(a, b, metrics.Shape(shape), spacing)
		if h != w && !(math.IsNaN(h) && math.IsNaN(w)) {
			t.Errorf("region %s: HD95 %v, want %v", r.Key(), h, w)
		}
	}
	// A scalar region is its label.
	if g, w := p.RegionMetrics(Region{Labels: []int{2}, Scalar: true}), p.Metrics(2); g.TP != w.TP || g.FP != w.FP || g.FN != w.FN || g.TN != w.TN || g.Dice != w.Dice {
		t.Errorf("scalar region 2: %+v, label 2: %+v", g, w)
	}
	h, _ := HD95Region(pred, ref, Region{Labels: []int{2}, Scalar: true}, 5, shape, spacing)
	if w, _ := HD95(pred, ref, 2, shape, spacing); h != w {
		t.Errorf("scalar region 2: HD95 %v, label 2: %v", h, w)
	}
}

func writeDataset(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "dataset.json")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestReadDatasetRegions follows nnU-Net's LabelManager: regions only when
// some label is a list of more than one entry ([3, 3] counts), then every
// entry but background and ignore is a region in the file's order; a
// list of one in a label dataset is that label.
func TestReadDatasetRegions(t *testing.T) {
	keys := func(d *Dataset) string {
		var k []string
		for _, r := range d.Regions {
			k = append(k, r.Key()+"="+r.Name)
		}
		return strings.Join(k, " ")
	}
	for _, tc := range []struct {
		body, regions string
		labels        []int
	}{
		{`{"labels": {"background": 0, "whole tumor": [1, 2, 3], "tumor core": [2, 3], "enhancing tumor": 3}, "regions_class_order": [1, 2, 3]}`,
			"(1, 2, 3)=whole tumor (2, 3)=tumor core 3=enhancing tumor", []int{1, 2, 3}},
		// the file's order, not the keys'; background lists dropped; a
		// repeated region scored once (regions_class_order counts both)
		{`{"labels": {"z": [2, 1], "background": [0, 0], "a": 2, "again": [2, 1], "ignore": 3}, "regions_class_order": [1, 2, 1]}`,
			"(2, 1)=z 2=a", []int{1, 2}},
		{`{"labels": {"background": 0, "twice": [3, 3]}, "regions_class_order": [3]}`, "(3, 3)=twice", []int{3}},
		{`{"labels": {"background": 0, "one": [1], "two": 2}}`, "", []int{1, 2}},
		// lists of one entry only: labels, regions_class_order unread
		// (LabelManager's _has_regions wants a list of more than one)
		{`{"labels": {"background": 0, "one": [1], "two": [2], "three": [3]}, "regions_class_order": [1, 2, 3]}`, "", []int{1, 2, 3}},
		{`{"labels": {"background": [0], "one": [1]}, "regions_class_order": "garbage"}`, "", []int{1}},
	} {
		d, err := ReadDataset(writeDataset(t, tc.body))
		if err != nil {
			t.Errorf("%s: %v", tc.body, err)
			continue
		}
		if keys(d) != tc.regions || !slices.Equal(d.Labels, tc.labels) || (tc.regions == "") != (d.Regions == nil) {
			t.Errorf("%s: regions %q labels %v, want %q %v", tc.body, keys(d), d.Labels, tc.regions, tc.labels)
		}
	}
	d, _ := ReadDataset(writeDataset(t, `{"labels": {"background": 0, "one": [1], "two": 2}}`))
	if d.Names[1] != "one" || d.Names[2] != "two" {
		t.Errorf("names %v", d.Names)
	}
}

// TestDatasetRegions: the raw reading data shares keeps a repeated
// region (one output channel each) where ReadDataset scores it once, and
// finds no regions where every list has one entry.
func TestDatasetRegions(t *testing.T) {
	labels := `{"z": [2, 1], "background": [0, 0], "a": 2, "again": [2, 1], "ignore": 3}`
	rs, order, err := DatasetRegions(json.RawMessage(labels), json.RawMessage(`[1, 2, 1]`))
	var keys []string
	for _, r := range rs {
		keys = append(keys, r.Key()+"="+r.Name)
	}
	if err != nil || strings.Join(keys, " ") != "(2, 1)=z 2=a (2, 1)=again" || !slices.Equal(order, []int{1, 2, 1}) {
		t.Errorf("regions %q order %v err %v", keys, order, err)
	}
	rs, order, err = DatasetRegions(json.RawMessage(`{"background": 0, "one": [1], "two": [2]}`), json.RawMessage(`[1, 2]`))
	if rs != nil || order != nil || err != nil {
		t.Errorf("lists of one entry: regions %v order %v err %v, want none", rs, order, err)
	}
	if rs, _, err := DatasetRegions(nil, nil); rs != nil || err != nil {
		t.Errorf("no labels: %v %v", rs, err)
	}
	_, _, err = DatasetRegions(json.RawMessage(`{"background": 0, "whole": [1, 2]}`), nil)
	wantErr(t, err, `labels: "whole" is (1, 2)`, "regions_class_order")
}

// TestReadDatasetMalformedRegion: a bad region entry, a missing or short
// regions_class_order are errors naming the dataset.json and the key.
func TestReadDatasetMalformedRegion(t *testing.T) {
	for _, tc := range []struct {
		body string
		want []string
	}{
		{`{"labels": {"background": 0, "whole": [1, "2", 3]}, "regions_class_order": [1]}`, []string{`"whole"`, `"2" is not a label value`}},
		{`{"labels": {"background": 0, "whole": [1, -2]}, "regions_class_order": [1]}`, []string{`"whole"`, "-2 is not a label value"}},
		{`{"labels": {"background": 0, "whole": [1, 256]}, "regions_class_order": [1]}`, []string{`"whole"`, "256"}},
		{`{"labels": {"background": 0, "whole": []}, "regions_class_order": [1]}`, []string{`"whole"`, "empty region"}},
		{`{"labels": {"background": 0, "whole": [1, 2], "core": "2"}, "regions_class_order": [1, 2]}`, []string{`"core"`, `"2" is not a label value`}},
		{`{"labels": {"background": 0, "whole": [1, 2], "ignore": [3]}, "regions_class_order": [1]}`, []string{`"ignore"`, "region"}},
		{`{"labels": {"background": 0, "whole": [1, 2], "core": 2}}`, []string{`"whole" is (1, 2)`, "regions_class_order"}},
		{`{"labels": {"background": 0, "whole": [1, 2], "core": 2}, "regions_class_order": [1]}`, []string{"regions_class_order: 1 values for the 2 regions"}},
	} {
		p := writeDataset(t, tc.body)
		_, err := ReadDataset(p)
		wantErr(t, err, append([]string{p}, tc.want...)...)
	}
	p := writeDataset(t, `{"labels": {"background": 0, "whole": [1, 2], "core": 2}, "regions_class_order": [1, 2]}`)
	_, _, _, err := DatasetLabels(p)
	wantErr(t, err, p, `"whole" is (1, 2)`, "regions")
}

// TestFolderRegionsChecks: regions and labels at once, or a region
// Folder cannot score, are refused.
func TestFolderRegionsChecks(t *testing.T) {
	_, err := Folder(nil, Options{Labels: []int{1}, Regions: []Region{{Labels: []int{1, 2}}}})
	wantErr(t, err, "not both")
	for _, tc := range []struct {
		r    []Region
		want string
	}{
		{[]Region{{Labels: []int{1, 2}, Name: "a"}, {Labels: []int{1, 2}, Name: "b"}}, `region "b" (1, 2) given twice`},
		{[]Region{{Labels: []int{0, 0}}}, "background"},
		{[]Region{{Labels: []int{1, 300}}}, "300"},
		{[]Region{{Labels: []int{1, 2}, Scalar: true}}, "scalar"},
		{[]Region{{Name: "x"}}, "no label values"},
	} {
		_, err := Folder(nil, Options{Regions: tc.r})
		wantErr(t, err, tc.want)
	}
}

// TestReadRegionSummaryMissingRegion: a case without one of the mean's
// regions is an error naming the file and the region.
func TestReadRegionSummaryMissingRegion(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.json")
	os.WriteFile(p, []byte(`{"foreground_mean": {"Dice": 0.5}, "mean": {"(1, 2)": {"Dice": 0.5}, "3": {"Dice": 0.5}},
	 "metric_per_case": [{"metrics": {"3": {"Dice": 0.5}}, "prediction_file": "p.nii", "reference_file": "r.nii"}]}`), 0o644)
	_, err := Read(p)
	wantErr(t, err, p, "p.nii", "region (1, 2)")
	os.WriteFile(p, []byte(`{"foreground_mean": {}, "mean": {"(1, x)": {}}, "metric_per_case": []}`), 0o644)
	_, err = Read(p)
	wantErr(t, err, p, `"(1, x)"`)
}

// SortCases orders cases by file name as nnU-Net lists its predictions
// folder: "a-b.nii.gz" before "a.nii.gz" ('-' sorts before '.'), the
// reference's name where no prediction file was written.
func TestSortCasesAsNNUNetListsFiles(t *testing.T) {
	cases := []Case{
		{ReferenceFile: "/ref/a.nii.gz"},
		{PredictionFile: "/pred/c.nii.gz", ReferenceFile: "/ref/0.nii.gz"},
		{ReferenceFile: "/ref/a-b.nii.gz"},
		{ReferenceFile: "/other/b.nii.gz"},
	}
	SortCases(cases)
	var got []string
	for _, c := range cases {
		got = append(got, filepath.Base(c.ReferenceFile))
	}
	if want := []string{"a-b.nii.gz", "a.nii.gz", "b.nii.gz", "0.nii.gz"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("order %v, want %v", got, want)
	}
}
