package dnn

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/internal/geom"
)

// recLib is a Lib over integer "pointers" that answers Find with given
// results and records the calls.
type recLib struct {
	perfs   []Perf
	findErr error
	finds   int
	runs    []string
	ws      map[int32]int
}

func (l *recLib) Version() string { return "9.0.0-test" }

func (l *recLib) Find(k Kind, p *Problem, x, w, y, ws int, wsBytes int) ([]Perf, error) {
	l.finds++
	return l.perfs, l.findErr
}

func (l *recLib) WorkspaceSize(k Kind, p *Problem, algo int32, m MathType) (int, error) {
	if n, ok := l.ws[algo]; ok {
		return n, nil
	}
	return 0, errors.New("CUDNN_STATUS_NOT_SUPPORTED")
}

func (l *recLib) Run(k Kind, p *Problem, algo int32, m MathType, beta float32, x, w, y, ws int, wsBytes int) error {
	l.runs = append(l.runs, k.String())
	return nil
}

func testProblem(t *testing.T, prec Precision) *Problem {
	t.Helper()
	p, err := NewProblem(geom.Conv{N: 1, InD: 4, InH: 4, InW: 4, InC: 2, OutC: 2, KD: 3, KH: 3, KW: 3, SD: 1, SH: 1, SW: 1, PD: 1, PH: 1, PW: 1}, prec)
	if err != nil {
		t.Fatal(err)
	}
	return &p
}

// TestPick: the fastest algorithm that ran, fits the workspace, keeps to
// float32 arithmetic where asked and, if asked, is deterministic; and the
// reason when none does.
func TestPick(t *testing.T) {
	perfs := []Perf{
		{Algo: 7, Status: 3000, TimeMs: -1},                                    // not supported
		{Algo: 6, TimeMs: 0.1, Memory: 1 << 40, Math: FMAMath},                 // too much workspace
		{Algo: 5, TimeMs: 0.2, Memory: 64, Math: DefaultMath},                  // TF32 tensor cores
		{Algo: 4, TimeMs: 0.3, Memory: 64, Math: FMAMath},                      // not deterministic
		{Algo: 3, TimeMs: 0.5, Memory: 64, Math: FMAMath, Deterministic: true}, // deterministic
	}
	for _, tc := range []struct {
		name string
		prec Precision
		o    Options
		perf []Perf
		algo int32
		why  string
	}{
		{"fp32", FP32, Options{}, perfs, 4, ""},
		{"tf32", TF32, Options{}, perfs, 5, ""},
		{"deterministic", FP32, Options{Deterministic: true}, perfs, 3, ""},
		{"small workspace", FP32, Options{WorkspaceLimit: 32}, perfs, -1, "each needs more than 32 bytes"},
		{"only tf32", FP32, Options{}, perfs[:3], -1, "all use tensor cores (TF32)"},
		{"none deterministic", FP32, Options{Deterministic: true}, perfs[:4], -1, "none of the 1 algorithms that fit the workspace is deterministic"},
		{"none supported", FP32, Options{}, perfs[:1], -1, "none of 1 algorithms supports it (1× status 3000)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := New[int](&recLib{perfs: tc.perf}, tc.o)
			c := e.Find(Forward, testProblem(t, tc.prec), 1, 2, 3, 4, 1<<30)
			if tc.algo >= 0 && (!c.OK || c.Algo != tc.algo) {
				t.Errorf("choice %+v, want algorithm %d", c, tc.algo)
			}
			if tc.algo < 0 && (c.OK || !strings.Contains(c.Why, tc.why)) {
				t.Errorf("choice %+v, want none because %q", c, tc.why)
			}
			if tc.algo < 0 && (len(e.Notes()) != 1 || !strings.Contains(e.Notes()[0], tc.why)) {
				t.Errorf("notes %q", e.Notes())
			}
		})
	}
}

// TestFindError: a failing Find is a choice with no algorithm whose
// reason is the error, and Run refuses it.
func TestFindError(t *testing.T) {
	l := &recLib{findErr: errors.New("cudnnFind (forward): CUDNN_STATUS_BAD_PARAM (status 2000)")}
	e := New[int](l, Options{})
	p := testProblem(t, BF16)
	c := e.Find(Forward, p, 1, 2, 3, 4, 8)
	if c.OK || !strings.Contains(c.Why, "CUDNN_STATUS_BAD_PARAM") {
		t.Fatalf("choice %+v", c)
	}
	if got, ok := e.Lookup(Forward, p); !ok || got.OK {
		t.Errorf("Lookup after a failed Find: %+v, %v", got, ok)
	}
	err := e.Run(Forward, p, c, 0, 1, 2, 3, 4)
	if err == nil || !strings.Contains(err.Error(), "no algorithm") || !strings.Contains(err.Error(), "bfloat16") {
		t.Errorf("Run of no algorithm: %v", err)
	}
	if len(l.runs) != 0 {
		t.Errorf("runs %v", l.runs)
	}
}

// TestCacheFile: choices survive in the file per GPU, cuDNN version and
// options; a damaged file is noted and replaced; an algorithm cuDNN no
// longer has is timed again.
func TestCacheFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a", "b.json")
	perfs := []Perf{{Algo: 2, TimeMs: 1, Memory: 16, Math: FMAMath}}
	l := &recLib{perfs: perfs, ws: map[int32]int{2: 16}}
	o := Options{GPU: "GPU A", CacheFile: file}
	e := New[int](l, o)
	p := testProblem(t, FP32)
	e.Find(BackwardFilter, p, 1, 2, 3, 4, 1<<20)
	if err := e.Save(); err != nil {
		t.Fatal(err)
	}
	e2 := New[int](l, o)
	c, ok := e2.Lookup(BackwardFilter, p)
	if !ok || !c.OK || c.Algo != 2 || c.Workspace != 16 || c.Math != FMAMath {
		t.Errorf("reloaded choice %+v, %v", c, ok)
	}
	if _, ok := e2.Lookup(Forward, p); ok {
		t.Error("a pass never timed was found in the cache")
	}
	for _, other := range []Options{{GPU: "GPU B", CacheFile: file}, {GPU: "GPU A", CacheFile: file, Deterministic: true}} {
		if _, ok := New[int](l, other).Lookup(BackwardFilter, p); ok {
			t.Errorf("options %+v took GPU A's default choice", other)
		}
	}
	// cuDNN no longer has algorithm 2: the entry is ignored.
	if _, ok := New[int](&recLib{ws: map[int32]int{}}, o).Lookup(BackwardFilter, p); ok {
		t.Error("a cached algorithm cuDNN rejects was used")
	}
	if err := os.WriteFile(file, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	e3 := New[int](l, o)
	if n := e3.Notes(); len(n) != 1 || !strings.Contains(n[0], "not a cache file") {
		t.Errorf("damaged cache: notes %q", n)
	}
	e3.Find(Forward, p, 1, 2, 3, 4, 1<<20)
	if err := e3.Save(); err != nil {
		t.Fatal(err)
	}
	if _, ok := New[int](l, o).Lookup(Forward, p); !ok {
		t.Error("the damaged cache was not replaced")
	}
}

func TestDefaultCacheFile(t *testing.T) {
	t.Setenv(CacheEnv, "/x/y.json")
	if got := DefaultCacheFile(); got != "/x/y.json" {
		t.Errorf("with %s set: %q", CacheEnv, got)
	}
	t.Setenv(CacheEnv, "off")
	if got := DefaultCacheFile(); got != "" {
		t.Errorf("off: %q", got)
	}
	t.Setenv(CacheEnv, "")
	t.Setenv("XDG_CACHE_HOME", "/cache")
	if got := DefaultCacheFile(); got != "/cache/voxtrain/cudnn-algorithms.json" {
		t.Errorf("default: %q", got)
	}
}
