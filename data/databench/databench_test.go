package databench

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/internal/testutil"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBenchConfigParses keeps the side-by-side config of
// docs/bench/data.md valid and equal in work to torch_pipeline.py.
func TestBenchConfigParses(t *testing.T) {
	f, err := config.Load("testdata/torch_pipeline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := f.Train.PatchSize
	a := f.Augment
	if p != [3]int{128, 128, 128} || f.Train.BatchSize != 2 || f.Train.IterationsPerEpoch != 0 || f.Seed != 51 || a.Rotation.P != 0.2 || a.Rotation.Degrees != [2]float64{-15, 15} ||
		a.Scaling.P != 0.2 || a.Scaling.Range != [2]float64{0.85, 1.15} || a.Mirror.P != 0.5 || a.Elastic.P != 0 || a.Noise.P != 0 {
		t.Errorf("bench config drifted from torch_pipeline.py: patch %v batch %d augment %+v", p, f.Train.BatchSize, a)
	}
}

func TestRunDigestsAgree(t *testing.T) {
	d := testutil.DemoDir(t)
	var cases strings.Builder
	for _, id := range []string{"hippocampus_001", "hippocampus_006", "hippocampus_011", "hippocampus_019"} {
		cases.WriteString("    - {image: " + filepath.Join(d, "imagesTr", id+".nii.gz") +
			", label: " + filepath.Join(d, "labelsTr", id+".nii.gz") + "}\n")
	}
	p := writeConfig(t, `
data:
  fold: -1
  cases:
`+cases.String()+`augment:
  preset: nnunet
train:
  iterations_per_epoch: 3
  patch_size: [24, 32, 24]
  batch_size: 2
`)
	f, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rs, err := Run(context.Background(), f, Options{Workers: []int{0, 1, 2}, Digest: true, Source: "gz", Logger: log, ConsumerMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 {
		t.Fatalf("%d results", len(rs))
	}
	for _, r := range rs {
		if r.Samples != 12 || r.Digest == "" || r.Digest != rs[0].Digest {
			t.Errorf("workers %d: %d samples, digest %s (first %s)", r.Workers, r.Samples, r.Digest, rs[0].Digest)
		}
		if r.SamplesPerSec <= 0 || r.FirstBatch <= 0 || len(r.Gaps) != 1 || len(r.EpochTimes) != 2 || r.Stage[0] <= 0 {
			t.Errorf("workers %d: incomplete result %+v", r.Workers, r)
		}
		if r.WaitFraction() < 0 || r.WaitFraction() > 1 {
			t.Errorf("wait fraction %g", r.WaitFraction())
		}
	}
	var sb strings.Builder
	ss := Summarize(rs)
	WriteTable(&sb, ss, 1)
	if !WriteDigests(&sb, ss) || !strings.Contains(sb.String(), "| gz | 2 |") {
		t.Errorf("report:\n%s", sb.String())
	}
	ms, limit, err := InflateBound(f)
	if err != nil || ms <= 0 || limit <= 0 {
		t.Errorf("inflate bound %g ms, %g/s, %v", ms, limit, err)
	}
}
