package data

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/data/store"
	"github.com/voxtrain/voxtrain/nifti"
	"github.com/voxtrain/voxtrain/preprocess"
)

func TestStorePatchReadsEqualFullDecodeCrops(t *testing.T) {
	dir := demoDataset(t, 3)
	cfg := filled(config.Data{Dataset: dir, Fold: -1, StoreChunk: 16})
	if _, err := Prepare(context.Background(), cfg, PrepareOptions{Logger: discard()}); err != nil {
		t.Fatal(err)
	}
	ds, _ := OpenDataset(cfg)
	st, err := store.Open(cfg.StoreDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p := preprocess.SpecOf(cfg)
	r := rand.New(rand.NewPCG(5, 5))
	var sc store.Scratch
	for _, c := range ds.Cases {
		v, _, err := readCase(c, 1, &p, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		sc2, err := st.Case(c.ID)
		if err != nil {
			t.Fatal(err)
		}
		m, err := decodeMeta(sc2.Extra, sc2.Shape)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(m.fg) != fmt.Sprint(v.FG) || m.spacing != v.Spacing || m.affine != v.Affine {
			t.Errorf("case %s: stored metadata differs from a fresh decode", c.ID)
		}
		for it := 0; it < 25; it++ {
			var lo, hi [3]int
			for a := range 3 {
				sz := 1 + r.IntN(v.Shape[a])
				lo[a] = r.IntN(v.Shape[a] - sz + 1)
				hi[a] = lo[a] + sz
			}
			n := (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2])
			img := [][]float32{make([]float32, n)}
			lbl := make([]uint8, n)
			if err := sc2.ReadRegion(lo, hi, img, lbl, &sc); err != nil {
				t.Fatal(err)
			}
			k := 0
			for z := lo[0]; z < hi[0]; z++ {
				for y := lo[1]; y < hi[1]; y++ {
					for x := lo[2]; x < hi[2]; x++ {
						i := (z*v.Shape[1]+y)*v.Shape[2] + x
						if img[0][k] != v.Image[0][i] || lbl[k] != v.Label[i] {
							t.Fatalf("case %s region [%v,%v): voxel (%d,%d,%d) store %v/%d, decode %v/%d",
								c.ID, lo, hi, z, y, x, img[0][k], lbl[k], v.Image[0][i], v.Label[i])
						}
						k++
					}
				}
			}
		}
	}
}

func TestStoreRebuiltWhenSourceChanges(t *testing.T) {
	dir := demoDataset(t, 3)
	log, lb := testLogger()
	cfg := filled(config.Data{Dataset: dir, Fold: -1, Source: "store", Workers: workers(1)})
	rep, err := Prepare(context.Background(), cfg, PrepareOptions{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Written != 3 || rep.Current != 0 {
		t.Fatalf("first prepare wrote %d, kept %d", rep.Written, rep.Current)
	}
	ixPath := filepath.Join(cfg.StoreDir(), "index.json")
	st0, _ := os.Stat(ixPath)
	rep, _ = Prepare(context.Background(), cfg, PrepareOptions{Logger: log})
	if rep.Written != 0 || rep.Current != 3 {
		t.Fatalf("second prepare wrote %d, kept %d; want 0, 3", rep.Written, rep.Current)
	}
	if st1, _ := os.Stat(ixPath); !st1.ModTime().Equal(st0.ModTime()) {
		t.Error("an up-to-date store's index was rewritten")
	}
	// Touch a file without changing it: still current.
	img1 := filepath.Join(dir, "imagesTr", demoIDs[1]+".nii.gz")
	later := time.Now().Add(time.Minute)
	os.Chtimes(img1, later, later)
	if rep, _ = Prepare(context.Background(), cfg, PrepareOptions{Logger: log}); rep.Written != 0 {
		t.Errorf("a touched, unchanged file rebuilt %d cases", rep.Written)
	}
	// Replace case 1's image with a modified volume: Open (which only
	// reads) refuses the stale store, or with source auto decodes into the
	// cache instead; Setup rebuilds that case (only) and the loader then
	// serves the new voxels.
	h, data, err := nifti.ReadFloat32(img1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range data {
		data[i] = float32(i % 7)
	}
	if err := nifti.WriteFloat32(img1, h, data); err != nil {
		t.Fatal(err)
	}
	opt := Options{Patch: [3]int{8, 8, 8}, Batch: 1, Logger: log}
	if _, err := Open(cfg, opt); err == nil || !strings.Contains(err.Error(), "not current") || !strings.Contains(err.Error(), "train prepare") {
		t.Fatalf("Open of a stale store: %v, want an error naming the stale case and train prepare", err)
	}
	auto := cfg
	auto.Source = "auto"
	if l, err := Open(auto, opt); err != nil || l.Source != "cache" || !strings.Contains(lb.String(), "not reading the prepared store") {
		t.Errorf("source auto over a stale store: %v, log:\n%s", err, lb.String())
	} else {
		l.Close()
	}
	if _, err := Setup(context.Background(), cfg, SetupOptions{Logger: log}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(lb.String(), "rebuilt=1") {
		t.Errorf("Setup did not report rebuilding one case:\n%s", lb.String())
	}
	l := openLoader(t, cfg, opt)
	if l.Source != "store" {
		t.Fatalf("source %s", l.Source)
	}
	v, err := l.LoadCase(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	p := preprocess.SpecOf(cfg)
	want, _, err := readCase(l.ds.Cases[1], 1, &p, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want.Image[0] {
		if v.Image[0][i] != want.Image[0][i] {
			t.Fatalf("store serves old voxels at %d: %v, want %v", i, v.Image[0][i], want.Image[0][i])
		}
	}
	// A different preprocessing config rebuilds everything.
	cfg2 := cfg
	cfg2.Normalization = config.StringList{"none"}
	if rep, _ = Prepare(context.Background(), cfg2, PrepareOptions{Logger: log}); rep.Written != 3 {
		t.Errorf("changed normalisation rebuilt %d cases, want 3", rep.Written)
	}
}
