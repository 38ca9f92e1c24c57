package data

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/voxtrain/voxtrain/config"
)

// TestFormatsLinkedIn: an nnU-Net dataset whose file_ending is one of the
// formats formats.go links in (NRRD, MetaImage, TIFF) opens, with its
// cases found under that ending, and trains with NIfTI's guarantee: the
// same batches from every source and worker count. Each case is the
// format's label fixture (5×6×7, classes 0..2) as both image and label.
func TestFormatsLinkedIn(t *testing.T) {
	for _, f := range []struct{ ending, fixture string }{
		{".nrrd", "../nrrd/testdata/labels_uint8.nrrd"},
		{".mha", "../metaimage/testdata/labels_uint8.mha"},
		{".tif", "../tiff/testdata/labels_uint8.tif"},
	} {
		t.Run(f.ending, func(t *testing.T) {
			b, err := os.ReadFile(f.fixture)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			for _, sub := range []string{"imagesTr", "labelsTr"} {
				if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 2 {
				for _, p := range []string{fmt.Sprintf("imagesTr/c%d_0000%s", i, f.ending), fmt.Sprintf("labelsTr/c%d%s", i, f.ending)} {
					if err := os.WriteFile(filepath.Join(dir, p), b, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			js := `{"channel_names":{"0":"MRI"},"labels":{"background":0,"a":1,"b":2},"numTraining":2,"file_ending":"` + f.ending + `"}`
			if err := os.WriteFile(filepath.Join(dir, "dataset.json"), []byte(js), 0o644); err != nil {
				t.Fatal(err)
			}
			base := filled(config.Data{Dataset: dir, Fold: -1})
			ds, err := OpenDataset(base)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(ds.Cases); n != 2 {
				t.Fatalf("%d cases, want 2", n)
			}
			// Trained on as NIfTI cases are: the same augmented batches
			// from every source and worker count (patches larger than the
			// volume along z: padding).
			opt := Options{Seed: 5, Iterations: 2, Patch: [3]int{8, 4, 4}, Batch: 2, Augment: nnunetAug(t)}
			if _, err := Prepare(context.Background(), base, PrepareOptions{Logger: discard()}); err != nil {
				t.Fatal(err)
			}
			sameBatchesEverywhere(t, base, opt, []string{"cache", "gz", "store"}, []int{1, 3}, 2, 4, nil)
		})
	}
}
