package dnn

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// DefaultWorkspaceLimit is the most workspace an algorithm may use when
// Options leave it 0: 1 GiB, a little over 1 % of an 80 GB GPU.
const DefaultWorkspaceLimit = 1 << 30

// Options configure an Engine.
type Options struct {
	// WorkspaceLimit is the most workspace bytes an algorithm may use
	// (and the workspace Find times them in). 0: DefaultWorkspaceLimit.
	WorkspaceLimit int
	// Deterministic admits only algorithms cuDNN reports as
	// deterministic (no atomics), so that a step gives the same bits run
	// after run: what exact resume on a GPU needs. PyTorch's
	// torch.backends.cudnn.deterministic.
	Deterministic bool
	// GPU names the GPU model ("NVIDIA H100 80GB HBM3"): with cuDNN's
	// version and the options above it keys the disk cache, since the
	// fastest algorithm depends on all of them.
	GPU string
	// CacheFile is the disk cache of algorithm choices ("": none).
	CacheFile string
}

// Choice is the algorithm chosen for one pass of one problem.
type Choice struct {
	// OK is false when no algorithm of cuDNN's runs the problem within
	// the options (none supported, none deterministic, none within the
	// workspace limit): the caller computes it another way.
	OK        bool
	Algo      int32
	Math      MathType // the math type the algorithm was timed with and runs with
	Workspace int      // bytes
	TimeMs    float32  // cuDNN's timing when it was found
	Why       string   // when !OK, the reason
}

// Engine chooses and runs cuDNN's algorithms. Its methods may be called
// from several goroutines.
type Engine[B any] struct {
	lib Lib[B]
	opt Options

	mu       sync.Mutex
	choices  map[key]Choice
	disk     map[string]entry // the cache file's entries, as loaded
	dirty    bool             // choices found since the last Save
	notes    []string
	found    int // choices timed with Find
	reloaded int // choices taken from the disk cache
}

type key struct {
	k Kind
	p Problem
}

// New returns an Engine over lib, with the disk cache's choices for this
// GPU, cuDNN version and options loaded. A cache file that cannot be read
// is noted (Notes) and replaced by the next Save.
func New[B any](lib Lib[B], o Options) *Engine[B] {
	if o.WorkspaceLimit <= 0 {
		o.WorkspaceLimit = DefaultWorkspaceLimit
	}
	e := &Engine[B]{lib: lib, opt: o, choices: map[key]Choice{}, disk: map[string]entry{}}
	if o.CacheFile != "" {
		disk, err := readCache(o.CacheFile)
		if err != nil {
			e.notes = append(e.notes, fmt.Sprintf("cuDNN algorithm cache %s: %v (timing algorithms again; the file is rewritten)", o.CacheFile, err))
		}
		e.disk = disk
	}
	return e
}

// Options returns the engine's options (WorkspaceLimit filled in).
func (e *Engine[B]) Options() Options { return e.opt }

// Lib returns the library the engine runs on.
func (e *Engine[B]) Lib() Lib[B] { return e.lib }

// Notes returns what the engine noticed and worked around: an unreadable
// cache, problems cuDNN cannot run.
func (e *Engine[B]) Notes() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.notes...)
}

// Note records a note unless it was recorded before.
func (e *Engine[B]) Note(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, n := range e.notes {
		if n == s {
			return
		}
	}
	e.notes = append(e.notes, s)
}

// Counts returns how many choices were timed with Find and how many came
// from the disk cache.
func (e *Engine[B]) Counts() (found, reloaded int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.found, e.reloaded
}

// diskKey is the disk cache's key of pass k of p under the engine's GPU,
// cuDNN version and options.
func (e *Engine[B]) diskKey(k Kind, p *Problem) string {
	return fmt.Sprintf("%s | cuDNN %s | deterministic %v | workspace %d | %s | %s",
		e.opt.GPU, e.lib.Version(), e.opt.Deterministic, e.opt.WorkspaceLimit, k, p)
}

// Lookup returns the choice known for pass k of p, from memory or from
// the disk cache (whose algorithm's workspace is asked of cuDNN again, so
// a cache from elsewhere can at worst cost a Find).
func (e *Engine[B]) Lookup(k Kind, p *Problem) (Choice, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if c, ok := e.choices[key{k, *p}]; ok {
		return c, true
	}
	en, ok := e.disk[e.diskKey(k, p)]
	if !ok {
		return Choice{}, false
	}
	c := Choice{OK: en.OK, Algo: en.Algo, Math: en.Math, TimeMs: en.TimeMs, Why: en.Why}
	if c.OK {
		ws, err := e.lib.WorkspaceSize(k, p, c.Algo, c.Math)
		if err != nil || ws > e.opt.WorkspaceLimit {
			return Choice{}, false
		}
		c.Workspace = ws
	}
	e.choices[key{k, *p}] = c
	e.reloaded++
	return c, true
}

// Find times cuDNN's algorithms for pass k of p on the given buffers (the
// pass's output is overwritten) with wsBytes of workspace at ws, and
// returns the fastest that the options admit. A Find that fails is a
// choice with OK false: the caller computes the pass another way.
func (e *Engine[B]) Find(k Kind, p *Problem, x, w, y, ws B, wsBytes int) Choice {
	perfs, err := e.lib.Find(k, p, x, w, y, ws, wsBytes)
	var c Choice
	if err != nil {
		c.Why = err.Error()
	} else {
		c = e.pick(p, perfs, wsBytes)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !c.OK {
		e.notes = append(e.notes, fmt.Sprintf("cuDNN has no algorithm for the %s pass of %s (%s)", k, p, c.Why))
	}
	e.choices[key{k, *p}] = c
	e.found++
	e.dirty = true
	return c
}

// pick returns the fastest of perfs that ran, fits the workspace limit
// (and the wsBytes Find had), keeps to float32 arithmetic where p asks for
// it (FMAMath: an algorithm that ran on TF32 tensor cores does not count)
// and, if asked, is deterministic.
func (e *Engine[B]) pick(p *Problem, perfs []Perf, wsBytes int) Choice {
	sorted := append([]Perf(nil), perfs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].TimeMs < sorted[j].TimeMs })
	limit := min(e.opt.WorkspaceLimit, wsBytes)
	ran, fits, exact := 0, 0, 0
	statuses := map[int32]int{}
	for _, pf := range sorted {
		if pf.Status != 0 || pf.TimeMs < 0 {
			statuses[pf.Status]++
			continue
		}
		ran++
		if pf.Memory > int64(limit) {
			continue
		}
		fits++
		if p.Conv.Math == FMAMath && pf.Math != FMAMath {
			continue
		}
		exact++
		if e.opt.Deterministic && !pf.Deterministic {
			continue
		}
		return Choice{OK: true, Algo: pf.Algo, Math: pf.Math, Workspace: int(pf.Memory), TimeMs: pf.TimeMs}
	}
	switch {
	case ran == 0:
		var st []string
		for s, n := range statuses {
			st = append(st, fmt.Sprintf("%d× status %d", n, s))
		}
		sort.Strings(st)
		return Choice{Why: fmt.Sprintf("none of %d algorithms supports it (%s)", len(perfs), strings.Join(st, ", "))}
	case fits == 0:
		return Choice{Why: fmt.Sprintf("%d algorithms run but each needs more than %d bytes of workspace", ran, limit)}
	case exact == 0:
		return Choice{Why: fmt.Sprintf("the %d algorithms that fit the workspace all use tensor cores (TF32), not float32 arithmetic", fits)}
	}
	return Choice{Why: fmt.Sprintf("none of the %d algorithms that fit the workspace is deterministic", exact)}
}

// Run computes pass k of p with choice c (which must be OK), the
// workspace at ws holding at least c.Workspace bytes; beta 1 adds the
// result to the output, 0 overwrites it.
func (e *Engine[B]) Run(k Kind, p *Problem, c Choice, beta float32, x, w, y, ws B) error {
	if !c.OK {
		return fmt.Errorf("cuDNN %s of %s: no algorithm (%s)", k, p, c.Why)
	}
	if err := e.lib.Run(k, p, c.Algo, c.Math, beta, x, w, y, ws, c.Workspace); err != nil {
		return fmt.Errorf("cuDNN %s of %s with algorithm %d: %w", k, p, c.Algo, err)
	}
	return nil
}

// Save merges the choices found since the last Save into the cache file
// (atomically; other processes' entries are kept). Without a cache file or
// new choices it does nothing.
func (e *Engine[B]) Save() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.opt.CacheFile == "" || !e.dirty {
		return nil
	}
	add := map[string]entry{}
	for kk, c := range e.choices {
		add[e.diskKey(kk.k, &kk.p)] = entry{OK: c.OK, Algo: c.Algo, Math: c.Math, TimeMs: c.TimeMs, Why: c.Why}
	}
	if err := mergeCache(e.opt.CacheFile, add); err != nil {
		return fmt.Errorf("saving the cuDNN algorithm cache: %w", err)
	}
	for k, v := range add {
		e.disk[k] = v
	}
	e.dirty = false
	return nil
}
