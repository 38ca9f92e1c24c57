package infer

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/evaluation"
)

// TestMultiLabelLabels: nnU-Net regions paint regions_class_order's
// values, later regions over earlier ones (BraTS: whole tumour 2, core 1,
// enhancing 3 inside each other); without an order the classes above 0.5
// are bit-packed.
func TestMultiLabelLabels(t *testing.T) {
	// 3 channels × 5 voxels, channel-major.
	probs := []float32{
		0.9, 0.9, 0.9, 0.2, 0.6, // whole
		0.1, 0.8, 0.7, 0.1, 0.4, // core
		0.1, 0.1, 0.95, 0.9, 0.5, // enhancing (voxel 3 without the others)
	}
	got := MultiLabelLabels(probs, 3, 5, []int{2, 1, 3})
	for i, w := range []uint8{2, 1, 3, 3, 2} {
		if got[i] != w {
			t.Errorf("regions: voxel %d is %d, want %d", i, got[i], w)
		}
	}
	got = MultiLabelLabels(probs, 3, 5, nil)
	for i, w := range []uint8{1, 3, 7, 4, 1} {
		if got[i] != w {
			t.Errorf("bits: voxel %d is %08b, want %08b", i, got[i], w)
		}
	}
	x := []float32{0, 2, -2}
	Sigmoid(x)
	if x[0] != 0.5 || x[1] < 0.88 || x[1] > 0.881 || x[1]+x[2] < 0.99999 || x[1]+x[2] > 1.00001 {
		t.Errorf("Sigmoid: %v", x)
	}
}

// TestScoreCaseMultiLabel: each bit is scored on its own against the
// reference's bits (overlapping classes count for both), voxels whose
// reference is 255 count in none with ignore and as every class without.
func TestScoreCaseMultiLabel(t *testing.T) {
	// bit 0 and bit 1; voxel 5's reference is ignored.
	pred := []uint8{3, 1, 0, 2, 3, 1}
	ref := []uint8{3, 0, 1, 2, 2, 255}
	v := &data.Volume{Label: ref, Shape: [3]int{1, 2, 3}, Spacing: [3]float64{1, 1, 1}}
	cs, err := ScoreCaseMultiLabel("x", pred, v, 2, false, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	// bit 0: pred {0,1,4}, ref {0,2}: TP 1, FP 2, FN 1, TN 1.
	// bit 1: pred {0,3,4}, ref {0,3,4}: TP 3, FP 0, FN 0, TN 2.
	want := [][4]float64{{1, 2, 1, 1}, {3, 0, 0, 2}}
	for c, m := range cs.Metrics {
		if got := [4]float64{m.TP, m.FP, m.FN, m.TN}; got != want[c] {
			t.Errorf("bit %d: TP FP FN TN %v, want %v", c, got, want[c])
		}
	}
	if d := cs.Metrics[0].Dice; math.Abs(d-0.4) > 1e-12 {
		t.Errorf("bit 0 Dice %g, want 2·1/(2·1+2+1) = 0.4", d)
	}
	// Without ignore, 255 holds every bit: voxel 5 is a TP of bit 0 and
	// an FN of bit 1.
	cs, err = ScoreCaseMultiLabel("x", pred, v, 2, false, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m := cs.Metrics[0]; m.TP != 2 {
		t.Errorf("without ignore, bit 0 TP %g, want 2", m.TP)
	}
	if m := cs.Metrics[1]; m.FN != 1 {
		t.Errorf("without ignore, bit 1 FN %g, want 1", m.FN)
	}
	s := SummariseMultiLabel([]string{"a", "b"}, false, []evaluation.Case{cs})
	if len(s.Labels) != 2 || s.Labels[0] != 1 || s.Names[2] != "b" {
		t.Errorf("summary labels %v names %v, want 1, 2 named a, b", s.Labels, s.Names)
	}
}

// TestSummariseChannels: a dataset of nnU-Net regions is summarised by
// region, keyed as nnU-Net keys them, a region given twice once (its
// channels scored alike), and ChannelMeans gives back one mean per
// channel; a manifest's classes keep channel keys; scores of another
// number of channels are an error.
func TestSummariseChannels(t *testing.T) {
	ds := &data.Dataset{
		Regions: []evaluation.Region{
			{Labels: []int{1, 2}, Name: "whole"},
			{Labels: []int{2}, Name: "core"},
			{Labels: []int{3}, Scalar: true, Name: "enhancing"},
			{Labels: []int{1, 2}, Name: "again"},
		},
		MultiLabelNames: []string{"whole", "core", "enhancing", "again"},
	}
	cs := func(tp ...int64) evaluation.Case {
		c := evaluation.Case{ReferenceFile: "ref.nii.gz"}
		for _, n := range tp {
			c.Metrics = append(c.Metrics, evaluation.FromCounts(n, 1, 1, 10))
		}
		return c
	}
	cases := []evaluation.Case{cs(4, 2, 0, 4), cs(8, 1, 3, 8)}
	s, err := SummariseChannels(ds, false, cases)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for j := range s.Regions {
		keys = append(keys, s.Key(j)+"="+s.Regions[j].Name)
	}
	if s.Labels != nil || strings.Join(keys, " ") != "(1, 2)=whole (2,)=core 3=enhancing" || len(s.Cases[0].Metrics) != 3 || len(cases[0].Metrics) != 4 {
		t.Fatalf("regions %q labels %v, %d entries per case (the caller's %d)", keys, s.Labels, len(s.Cases[0].Metrics), len(cases[0].Metrics))
	}
	if m := s.Mean[2].Dice; m != 0.375 { // 2·0/(0+2) and 2·3/(6+2)
		t.Errorf("region 3's mean Dice %v, want 0.375 (the mean of 0 and 0.75)", m)
	}
	dice, hd95 := ChannelMeans(s, ds)
	if len(dice) != 4 || dice[0] != s.Mean[0].Dice || dice[3] != dice[0] || dice[1] != s.Mean[1].Dice || hd95 != nil {
		t.Errorf("ChannelMeans %v %v, want one per channel, the repeated region's twice", dice, hd95)
	}
	out := filepath.Join(t.TempDir(), "summary.json")
	if err := s.Write(out); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out)
	for _, k := range []string{`"(1, 2)": {`, `"(2,)": {`, `"3": {`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("summary.json lacks the key %s:\n%s", k, b)
		}
	}
	if _, err := SummariseChannels(ds, false, []evaluation.Case{cs(1, 2, 3)}); err == nil || !strings.Contains(err.Error(), "3 output channels, but the dataset has 4 regions") {
		t.Errorf("3 channels for 4 regions: err = %v", err)
	}
	manifest := &data.Dataset{MultiLabelNames: []string{"a", "b"}}
	s, err = SummariseChannels(manifest, false, []evaluation.Case{cs(1, 2)})
	if err != nil || s.Regions != nil || len(s.Labels) != 2 || s.Key(1) != "2" || s.Names[2] != "b" {
		t.Errorf("manifest classes: %+v, %v; want labels 1, 2 named a, b", s, err)
	}
	if dice, _ := ChannelMeans(s, manifest); len(dice) != 2 {
		t.Errorf("manifest ChannelMeans %v", dice)
	}
}

// TestScoreCaseMultiLabelUnknown: a class the case's crop does not
// annotate (its bit in unknown) scores NaN in every metric, whatever the
// voxels say, the other class as without it; the summary's mean of that
// class is then the other cases' (nanmean), not pulled down by the
// unannotated one.
func TestScoreCaseMultiLabelUnknown(t *testing.T) {
	pred := []uint8{3, 1, 0, 2, 3, 1}
	ref := []uint8{3, 0, 1, 2, 2, 0}
	v := &data.Volume{Label: ref, Shape: [3]int{1, 2, 3}, Spacing: [3]float64{1, 1, 1}}
	known, err := ScoreCaseMultiLabel("known", pred, v, 2, true, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Class 0 unknown in this case; its prediction misses class 0 entirely.
	cut := []uint8{2, 0, 0, 2, 2, 0}
	part, err := ScoreCaseMultiLabel("part", cut, v, 2, true, false, 0b01)
	if err != nil {
		t.Fatal(err)
	}
	m := part.Metrics[0]
	for name, x := range map[string]float64{"Dice": m.Dice, "IoU": m.IoU, "TP": m.TP, "FP": m.FP, "FN": m.FN, "TN": m.TN, "NPred": m.NPred, "NRef": m.NRef, "HD95": m.HD95} {
		if !math.IsNaN(x) {
			t.Errorf("unknown class 0: %s %v, want NaN", name, x)
		}
	}
	if part.Metrics[1] != known.Metrics[1] {
		t.Errorf("known class 1: %+v, want %+v as without the mask", part.Metrics[1], known.Metrics[1])
	}
	s := SummariseMultiLabel([]string{"a", "b"}, true, []evaluation.Case{known, part})
	if d := s.Mean[0].Dice; d != known.Metrics[0].Dice {
		t.Errorf("class 0's mean Dice %v, want the annotating case's %v alone", d, known.Metrics[0].Dice)
	}
}
