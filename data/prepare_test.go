package data

import (
	"context"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/data/store"
	"github.com/voxtrain/voxtrain/nifti"
	"github.com/voxtrain/voxtrain/preprocess"
)

// TestTargetSpacingSameOnEverySource: with target_spacing, the prepared
// store, the memory cache and the gz source (which resamples only the
// region each sample reads) give byte-identical batches, for any worker
// count, and the store holds the resampled grid.
func TestTargetSpacingSameOnEverySource(t *testing.T) {
	dir := demoDataset(t, 4)
	// Down along D, up along H, off-integer along W (the demo is 1 mm).
	target := []float64{1.6, 0.7, 1.3}
	base := filled(config.Data{Dataset: dir, Fold: -1, TargetSpacing: target})
	opt := Options{Seed: 21, Iterations: 3, Patch: [3]int{24, 40, 24}, Batch: 3, Augment: nnunetAug(t)} // larger than some resampled volumes
	rep, err := Prepare(context.Background(), base, PrepareOptions{Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Written != 4 || rep.TargetSpacing == nil || *rep.TargetSpacing != [3]float64{1.6, 0.7, 1.3} {
		t.Fatalf("prepare: %+v", rep)
	}
	ix, err := store.ReadIndex(base.StoreDir())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(strings.Fields(string(ix.Prep)), ""), `"target_spacing":[1.6,0.7,1.3]`) {
		t.Errorf("the store's fingerprint lacks the target spacing: %s", ix.Prep)
	}
	// Cases are read several times (3 epochs): the gz source's region path.
	ref := sameBatchesEverywhere(t, base, opt, []string{"store", "cache", "gz"}, []int{1, 3}, 3, 9, func(_ string, _ int, l *Loader) {
		for c := range l.Dataset().Cases {
			checkResampledCase(t, l, c, [3]float64{1.6, 0.7, 1.3})
		}
	})
	// Without resampling the batches differ (the test would prove nothing
	// otherwise).
	cfg := base
	cfg.TargetSpacing, cfg.Source, cfg.Workers = nil, "cache", workers(1)
	l := openLoader(t, cfg, opt)
	s, _ := l.Train(StreamOptions{Epochs: 3})
	if digestStream(t, s, 9) == ref {
		t.Error("resampled and unresampled batches are identical")
	}
	l.Close()
}

// checkResampledCase checks LoadCase's volume c: the resampled shape, the
// foreground index built on the resampled label, the source grid.
func checkResampledCase(t *testing.T, l *Loader, c int, target [3]float64) {
	t.Helper()
	v, err := l.LoadCase(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	cs := l.Dataset().Cases[c]
	h, err := nifti.ReadHeader(cs.Images[0])
	if err != nil {
		t.Fatal(err)
	}
	sh := h.Shape()
	srcShape := [3]int{sh[2], sh[1], sh[0]}
	want := preprocess.ResampledShape(srcShape, [3]float64{float64(h.Pixdim[3]), float64(h.Pixdim[2]), float64(h.Pixdim[1])}, target)
	n := want[0] * want[1] * want[2]
	if v.Shape != want || v.SourceShape != srcShape || len(v.Image[0]) != n || len(v.Label) != n {
		t.Fatalf("%s case %s: shape %v (source %v), %d/%d voxels; want %v from %v", l.Source, cs.ID, v.Shape, v.SourceShape, len(v.Image[0]), len(v.Label), want, srcShape)
	}
	if v.FG == nil || v.FG.Shape != want || len(v.FG.Classes) == 0 {
		t.Fatalf("%s case %s: foreground index %+v not built on the resampled grid", l.Source, cs.ID, v.FG)
	}
	for k, cl := range v.FG.Classes {
		cnt := 0
		for _, x := range v.Label {
			if x == cl {
				cnt++
			}
		}
		if v.FG.Counts[k] != cnt {
			t.Fatalf("%s case %s: class %d counted %d, the resampled label has %d", l.Source, cs.ID, cl, v.FG.Counts[k], cnt)
		}
		for _, loc := range v.FG.Locations[k] {
			if v.Label[loc] != cl {
				t.Fatalf("%s case %s: class %d location %d holds %d", l.Source, cs.ID, cl, loc, v.Label[loc])
			}
		}
	}
	for a := range 3 {
		if d := v.Spacing[a] - target[a]; d*d > (0.5*target[a]/float64(want[a]))*(0.5*target[a]/float64(want[a]))+1e-18 {
			t.Errorf("%s case %s: spacing %v, target %v", l.Source, cs.ID, v.Spacing, target)
		}
	}
}

// TestTargetSpacingFingerprint: changing target_spacing rebuilds every
// case; the same one keeps them; removing it rebuilds again.
func TestTargetSpacingFingerprint(t *testing.T) {
	dir := demoDataset(t, 2)
	log, lb := testLogger()
	cfg := filled(config.Data{Dataset: dir, Fold: -1, Workers: workers(1)})
	for i, step := range []struct {
		target  []float64
		written int
	}{
		{nil, 2},
		{nil, 0},
		{[]float64{2, 2, 2}, 2},
		{[]float64{2, 2, 2}, 0},
		{[]float64{2, 1, 2}, 2},
		{nil, 2},
	} {
		cfg.TargetSpacing = step.target
		rep, err := Prepare(context.Background(), cfg, PrepareOptions{Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Written != step.written || rep.Current != 2-step.written {
			t.Errorf("step %d (target %v): wrote %d, kept %d; want %d written\n%s", i, step.target, rep.Written, rep.Current, step.written, lb.String())
		}
	}
	// ReadCase (prediction) resamples too, and maps a prediction back.
	cfg.TargetSpacing = []float64{2, 1, 2}
	ds, _ := OpenDataset(cfg)
	v, err := ReadCase(cfg, ds.Cases[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	if v.Shape == v.SourceShape || v.Shape[1] != v.SourceShape[1] {
		t.Errorf("ReadCase: shape %v from %v", v.Shape, v.SourceShape)
	}
	back, err := v.LabelsOnSourceGrid(v.Label)
	if err != nil || len(back) != v.SourceShape[0]*v.SourceShape[1]*v.SourceShape[2] {
		t.Errorf("labels on the source grid: %d voxels, %v", len(back), err)
	}
}

// TestStoreMetaWithoutSourceShape: a store written before the source
// shape was recorded decodes with the source shape equal to the shape.
func TestStoreMetaWithoutSourceShape(t *testing.T) {
	v := &Volume{Shape: [3]int{4, 5, 6}, Spacing: [3]float64{1, 2, 3}}
	old := encodeMetaBody(v)
	m, err := decodeMeta(old, v.Shape)
	if err != nil || m.srcShape != v.Shape || m.spacing != v.Spacing {
		t.Errorf("old metadata: %+v, %v", m, err)
	}
	v.SourceShape = [3]int{8, 5, 3}
	m, err = decodeMeta(encodeMeta(v), v.Shape)
	if err != nil || m.srcShape != v.SourceShape {
		t.Errorf("new metadata: source %v, %v", m.srcShape, err)
	}
}
