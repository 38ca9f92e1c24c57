package data

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"sync"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/internal/testutil"
)

var demoIDs = []string{"hippocampus_001", "hippocampus_006", "hippocampus_011", "hippocampus_019",
	"hippocampus_024", "hippocampus_033", "hippocampus_037", "hippocampus_040"}

// demoDataset copies n demo cases into a fresh MSD-layout folder (so tests
// may change files, and write splits and stores next to them).
func demoDataset(t *testing.T, n int) string { return testutil.DemoSubset(t, demoIDs[:n]) }

func nnunetAug(t *testing.T) config.Augment {
	c, err := config.AugmentPreset(config.PresetNNUNet)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// openLoader sets up cfg's dataset (splits, ct statistics, store) and
// opens a loader, as a run does.
func openLoader(t *testing.T, cfg config.Data, opt Options) *Loader {
	t.Helper()
	if opt.Logger == nil {
		opt.Logger, _ = testLogger()
	}
	cfg, err := Setup(context.Background(), cfg, SetupOptions{Logger: opt.Logger})
	if err != nil {
		t.Fatal(err)
	}
	l, err := Open(cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// digestStream hashes every byte of n batches.
func digestStream(t *testing.T, s *BatchStream, n int) string {
	t.Helper()
	h := sha256.New()
	for i := 0; i < n; i++ {
		b, err := s.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		binary.Write(h, binary.LittleEndian, b.Image)
		binary.Write(h, binary.LittleEndian, b.Label)
		b.Release()
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

func workers(n int) config.Workers { return config.Workers{N: n, Set: true} }

// sameBatchesEverywhere opens a loader for every source × worker count,
// reads batches training batches over epochs epochs (and then expects the
// end), calls check (when not nil) with the open loader, and fails unless
// every digest equals the first one, which it returns.
func sameBatchesEverywhere(t *testing.T, base config.Data, opt Options, sources []string, workerCounts []int, epochs, batches int, check func(src string, w int, l *Loader)) string {
	t.Helper()
	var ref, refName string
	for _, src := range sources {
		for _, w := range workerCounts {
			cfg := base
			cfg.Source, cfg.Workers = src, workers(w)
			l := openLoader(t, cfg, opt)
			if l.Source != src {
				t.Fatalf("source %s, want %s", l.Source, src)
			}
			s, err := l.Train(StreamOptions{Epochs: epochs})
			if err != nil {
				t.Fatal(err)
			}
			d := digestStream(t, s, batches)
			if _, err := s.Next(context.Background()); err != io.EOF {
				t.Errorf("%s, %d workers: after %d epochs × %d batches: %v, want EOF", src, w, epochs, batches/epochs, err)
			}
			if check != nil {
				check(src, w, l)
			}
			l.Close()
			name := fmt.Sprintf("%s/%d workers", src, w)
			if ref == "" {
				ref, refName = d, name
			} else if d != ref {
				t.Errorf("%s: digest %s, %s gave %s", name, d[:12], refName, ref[:12])
			}
		}
	}
	return ref
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// isCropOf reports whether img/lbl equal some crop of v (all inside).
func isCropOf(img, lbl []float32, v *Volume, p [3]int) bool {
	s := v.Shape
	for z := 0; z+p[0] <= s[0]; z++ {
		for y := 0; y+p[1] <= s[1]; y++ {
			for x := 0; x+p[2] <= s[2]; x++ {
				if v.Image[0][(z*s[1]+y)*s[2]+x] != img[0] {
					continue
				}
				ok := true
				for i := 0; i < p[0] && ok; i++ {
					for j := 0; j < p[1] && ok; j++ {
						for k := 0; k < p[2]; k++ {
							src := ((z+i)*s[1]+y+j)*s[2] + x + k
							dst := (i*p[1]+j)*p[2] + k
							if v.Image[0][src] != img[dst] || float32(v.Label[src]) != lbl[dst] {
								ok = false
								break
							}
						}
					}
				}
				if ok {
					return true
				}
			}
		}
	}
	return false
}

func corruptFile(t *testing.T, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Keep the gzip header, break the deflate stream after it.
	for i := 40; i < len(b) && i < 400; i++ {
		b[i] ^= 0xa5
	}
	os.WriteFile(path, b, 0o644)
}

// filled returns c with every zero field taken from config.Default().Data,
// so a test names only the fields it is about (an explicit zero that
// differs from the default cannot be written this way: set it after).
func filled(c config.Data) config.Data {
	d := config.Default().Data
	cv, dv := reflect.ValueOf(&c).Elem(), reflect.ValueOf(d)
	for i := 0; i < cv.NumField(); i++ {
		if cv.Field(i).IsZero() {
			cv.Field(i).Set(dv.Field(i))
		}
	}
	return c
}

// logBuf collects log output safely from many goroutines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func testLogger() (*slog.Logger, *logBuf) {
	lb := &logBuf{}
	return slog.New(slog.NewTextHandler(lb, nil)), lb
}

// allocsPerBatch takes warm batches from s, then returns the allocations
// per Next + Release over runs more (testing.AllocsPerRun).
func allocsPerBatch(t *testing.T, s *BatchStream, warm, runs int) float64 {
	t.Helper()
	next := func() {
		b, err := s.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		b.Release()
	}
	for range warm {
		next()
	}
	return testing.AllocsPerRun(runs, next)
}
