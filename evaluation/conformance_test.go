package evaluation

import (
	"math"
	"os"
	"path/filepath"
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

func sameSummary(t *testing.T, got, want *Summary) {
	t.Helper()
	if len(got.Labels) != len(want.Labels) || len(got.Cases) != len(want.Cases) {
		t.Fatalf("labels %v, %d cases; want %v, %d", got.Labels, len(got.Cases), want.Labels, len(want.Cases))
	}
	for j, l := range want.Labels {
		if got.Labels[j] != l {
			t.Fatalf("labels %v, want %v", got.Labels, want.Labels)
		}
		sameMetrics(t, "mean "+got.LabelName(l), got.Mean[j], want.Mean[j])
	}
	sameMetrics(t, "foreground_mean", got.ForegroundMean, want.ForegroundMean)
	for i, c := range want.Cases {
		g := got.Cases[i]
		if filepath.Base(g.PredictionFile) != filepath.Base(c.PredictionFile) || filepath.Base(g.ReferenceFile) != filepath.Base(c.ReferenceFile) {
			t.Errorf("case %d: %s vs %s, want %s vs %s", i, g.PredictionFile, g.ReferenceFile, c.PredictionFile, c.ReferenceFile)
		}
		for j, l := range want.Labels {
			sameMetrics(t, c.PredictionFile+" "+got.LabelName(l), g.Metrics[j], c.Metrics[j])
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
