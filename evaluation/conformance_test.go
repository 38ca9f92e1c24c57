package evaluation

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMatchesNNUNet scores testdata/nnunet (tiny label maps scored by
// nnU-Net v2's own compute_metrics_on_folder, see make_fixture.py) and
// holds every number of our summary to nnU-Net's, then the file itself to
// nnU-Net's byte for byte (same layout, NaN tokens, number formats).
func TestMatchesNNUNet(t *testing.T) {
	t.Chdir("testdata/nnunet")
	pairs, err := MatchFiles("pred", "ref", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file   string
		labels []int
	}{{"summary_12.json", []int{1, 2}}, {"summary_1234.json", []int{1, 2, 3, 4}}} {
		t.Run(tc.file, func(t *testing.T) {
			want, err := Read(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Folder(pairs, Options{Labels: tc.labels})
			if err != nil {
				t.Fatal(err)
			}
			sameSummary(t, got, want)
			out := filepath.Join(t.TempDir(), "summary.json")
			if err := got.Write(out); err != nil {
				t.Fatal(err)
			}
			back, err := Read(out)
			if err != nil {
				t.Fatal(err)
			}
			sameSummary(t, back, want)
			a, _ := os.ReadFile(out)
			b, _ := os.ReadFile(tc.file)
			if string(a) != string(b) {
				t.Errorf("summary.json differs from nnU-Net's:\n%s\nwant\n%s", a, b)
			}
		})
	}
}

// TestMatchesNNUNetPairwise scores testdata/nnunet_many (12 cases, 10
// labels, scored by nnU-Net v2's compute_metrics_on_folder, see its
// make_fixture.py) and holds our summary.json to nnU-Net's byte for byte:
// from 8 values on NumPy's means sum pairwise, and make_fixture.py checked
// that a running sum misses some of these means in the last bits.
func TestMatchesNNUNetPairwise(t *testing.T) {
	t.Chdir("testdata/nnunet_many")
	pairs, err := MatchFiles("pred", "ref", ".nii.gz")
	if err != nil {
		t.Fatal(err)
	}
	want, err := Read("summary.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(pairs) < 10 || len(want.Labels) < 9 {
		t.Fatalf("%d cases, labels %v: want the fixture's 12 cases and 10 labels", len(pairs), want.Labels)
	}
	got, err := Folder(pairs, Options{Labels: want.Labels})
	if err != nil {
		t.Fatal(err)
	}
	for j := range got.Mean {
		exactMetrics(t, "mean "+got.EntryName(j), got.Mean[j], want.Mean[j])
	}
	exactMetrics(t, "foreground_mean", got.ForegroundMean, want.ForegroundMean)
	out := filepath.Join(t.TempDir(), "summary.json")
	if err := got.Write(out); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(out)
	b, _ := os.ReadFile("summary.json")
	if string(a) != string(b) {
		t.Errorf("summary.json differs from nnU-Net's:\n%s\nwant\n%s", a, b)
	}
}

// exactMetrics holds got's metrics to want's bit for bit (NaN to NaN).
func exactMetrics(t *testing.T, what string, got, want Metrics) {
	t.Helper()
	for f, name := range fieldNames[:8] {
		g, w := *got.field(f), *want.field(f)
		if math.Float64bits(g) != math.Float64bits(w) && !(math.IsNaN(g) && math.IsNaN(w)) {
			t.Errorf("%s %s: %v, nnU-Net %v", what, name, g, w)
		}
	}
}

// sameSummary holds got to want entry by entry, matched by summary.json
// key (Folder keeps dataset.json's region order, Read the file's).
// TestMatchesNNUNetRegions scores testdata/nnunet_regions (a region-based
// dataset.json and tiny label maps, scored by nnU-Net v2's own
// compute_metrics_on_folder on its LabelManager's foreground_regions, see
// make_fixture.py) with the ignore label and without, and holds every
// number to nnU-Net's, then the file byte for byte (region keys and their
// order); with the dataset.json's names the file also names the regions.
func TestMatchesNNUNetRegions(t *testing.T) {
	t.Chdir("testdata/nnunet_regions")
	d, err := ReadDataset("dataset.json")
	if err != nil {
		t.Fatal(err)
	}
	var keys, names []string
	for _, r := range d.Regions {
		keys, names = append(keys, r.Key()), append(names, r.Name)
	}
	// nnU-Net's lm.foreground_regions: [(1, 2, 3), (3, 2), 3, (1,)]
	if strings.Join(keys, " ") != "(1, 2, 3) (3, 2) 3 (1,)" || names[0] != "whole tumor" || names[3] != "edema" || d.Ignore != 4 || d.Ending != ".nii.gz" {
		t.Fatalf("dataset.json: regions %q %q, ignore %d, ending %q", keys, names, d.Ignore, d.Ending)
	}
	pairs, err := MatchFiles("pred", "ref", d.Ending)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file   string
		ignore int
	}{{"summary_ignore.json", d.Ignore}, {"summary.json", 0}} {
		t.Run(tc.file, func(t *testing.T) {
			want, err := Read(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			if len(want.Regions) != 4 || want.Regions[0].Key() != "(1, 2, 3)" || want.Regions[3].Key() != "3" || !want.Regions[3].Scalar {
				t.Fatalf("nnU-Net's regions read as %+v", want.Regions)
			}
			got, err := Folder(pairs, Options{Regions: d.Regions, Ignore: tc.ignore})
			if err != nil {
				t.Fatal(err)
			}
			sameSummary(t, got, want)
			dir := t.TempDir()
			named := filepath.Join(dir, "named.json")
			if err := got.Write(named); err != nil {
				t.Fatal(err)
			}
			back, err := Read(named)
			if err != nil {
				t.Fatal(err)
			}
			sameSummary(t, back, want)
			b, _ := os.ReadFile(named)
			if !strings.Contains(string(b), `"label_names": {`+"\n"+`        "(1, 2, 3)": "whole tumor",`) || back.Regions[0].Name != "whole tumor" {
				t.Errorf("the regions' names are not written and read back (%+v):\n%s", back.Regions, b)
			}
			// nnU-Net writes no names: without them the files are equal.
			for i := range got.Regions {
				got.Regions[i].Name = ""
			}
			out := filepath.Join(dir, "summary.json")
			if err := got.Write(out); err != nil {
				t.Fatal(err)
			}
			a, _ := os.ReadFile(out)
			w, _ := os.ReadFile(tc.file)
			if string(a) != string(w) {
				t.Errorf("summary.json differs from nnU-Net's:\n%s\nwant\n%s", a, w)
			}
		})
	}
	// Scored with and without the ignore label, the files differ: the
	// test above could tell.
	a, _ := os.ReadFile("summary_ignore.json")
	b, _ := os.ReadFile("summary.json")
	if string(a) == string(b) {
		t.Error("the fixture's summaries with and without the ignore label are equal")
	}
}

func sameSummary(t *testing.T, got, want *Summary) {
	t.Helper()
	if got.entries() != want.entries() || len(got.Cases) != len(want.Cases) || (got.Regions == nil) != (want.Regions == nil) {
		t.Fatalf("labels %v regions %v, %d cases; want %v %v, %d", got.Labels, got.Regions, len(got.Cases), want.Labels, want.Regions, len(want.Cases))
	}
	at := map[string]int{}
	for j := range got.entries() {
		at[got.Key(j)] = j
	}
	idx := make([]int, want.entries())
	for j := range want.entries() {
		g, ok := at[want.Key(j)]
		if !ok || (want.Regions == nil && g != j) {
			t.Fatalf("entry %s: got %v %v, want %v %v", want.Key(j), got.Labels, got.Regions, want.Labels, want.Regions)
		}
		idx[j] = g
		sameMetrics(t, "mean "+got.EntryName(g), got.Mean[g], want.Mean[j])
	}
	sameMetrics(t, "foreground_mean", got.ForegroundMean, want.ForegroundMean)
	for i, c := range want.Cases {
		g := got.Cases[i]
		if filepath.Base(g.PredictionFile) != filepath.Base(c.PredictionFile) || filepath.Base(g.ReferenceFile) != filepath.Base(c.ReferenceFile) {
			t.Errorf("case %d: %s vs %s, want %s vs %s", i, g.PredictionFile, g.ReferenceFile, c.PredictionFile, c.ReferenceFile)
		}
		for j := range want.entries() {
			sameMetrics(t, c.PredictionFile+" "+got.EntryName(idx[j]), g.Metrics[idx[j]], c.Metrics[j])
		}
	}
}

func sameMetrics(t *testing.T, what string, got, want Metrics) {
	t.Helper()
	for f, name := range fieldNames[:8] {
		g, w := *got.field(f), *want.field(f)
		if g != w && !(math.IsNaN(g) && math.IsNaN(w)) && math.Abs(g-w) > 1e-12*math.Abs(w) {
			t.Errorf("%s %s: %v, nnU-Net %v", what, name, g, w)
		}
	}
}
