package evaluation

import "testing"

// TestPairsIgnore: after Ignore, the voxels whose reference is the ignore
// label are in no count, whatever was predicted there, so the metrics are
// those of the case with those voxels removed.
func TestPairsIgnore(t *testing.T) {
	ref := []uint8{0, 1, 1, 2, 3, 3, 3, 0, 2, 1}
	pred := []uint8{0, 1, 2, 2, 1, 0, 2, 1, 2, 1}
	var kr, kp []uint8
	for i, r := range ref {
		if r != 3 {
			kr, kp = append(kr, r), append(kp, pred[i])
		}
	}
	p, err := CountPairs(pred, ref)
	if err != nil {
		t.Fatal(err)
	}
	p.Ignore(3)
	want, err := CountPairs(kp, kr)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []int{0, 1, 2} {
		g, w := p.Metrics(l), want.Metrics(l)
		if g.TP != w.TP || g.FP != w.FP || g.FN != w.FN || g.TN != w.TN {
			t.Errorf("label %d: %+v, want those of the case without ignored voxels %+v", l, g, w)
		}
	}
	if got := p.Present(); len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Errorf("present %v, want [1 2]", got)
	}
}
