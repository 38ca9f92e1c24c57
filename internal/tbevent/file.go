package tbevent

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Writer appends events to one event file.
type Writer struct {
	f    *os.File
	path string
}

// Create starts a new event file in dir (made if missing), named
// events.out.tfevents.<unix seconds>.<host>.<n>.voxtrain, and writes its
// first event: the file version, at wall time start. n is 0 unless a file
// of that name exists already (a second writer within the same second),
// then the next free number: the name always carries it, so that files
// of one second sort in the order they were made — TensorBoard reads the
// files of a directory in name order.
func Create(dir string, start time.Time) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("tensorboard: %w", err)
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	host = strings.NewReplacer("/", "_", `\`, "_", "\x00", "_").Replace(host)
	for n := 0; ; n++ {
		path := filepath.Join(dir, fmt.Sprintf("events.out.tfevents.%d.%s.%d.voxtrain", start.Unix(), host, n))
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) && n < 1000 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("tensorboard: create event file: %w", err)
		}
		w := &Writer{f: f, path: path}
		if err := w.Write(Event{WallTime: Seconds(start), FileVersion: FileVersion}); err != nil {
			f.Close()
			return nil, err
		}
		return w, nil
	}
}

// Path is the event file's path.
func (w *Writer) Path() string { return w.path }

// Write appends e as one record in a single write and syncs the file:
// events are written once per epoch, and a crash then loses at most the
// record being written (which TensorBoard's reader skips as truncated).
func (w *Writer) Write(e Event) error {
	b, err := Marshal(e)
	if err != nil {
		return fmt.Errorf("tensorboard %s: %w", w.path, err)
	}
	if _, err := w.f.Write(AppendRecord(nil, b)); err != nil {
		return fmt.Errorf("tensorboard: write %s: %w", w.path, err)
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("tensorboard: sync %s: %w", w.path, err)
	}
	return nil
}

// Close closes the file.
func (w *Writer) Close() error {
	if err := w.f.Close(); err != nil {
		return fmt.Errorf("tensorboard: close %s: %w", w.path, err)
	}
	return nil
}

// Seconds is t as an event's wall_time: seconds since the Unix epoch.
func Seconds(t time.Time) float64 {
	return float64(t.Unix()) + float64(t.Nanosecond())/1e9
}

// ReadFile returns the events of an event file in order. A record cut
// short at the end is an error wrapping ErrTruncated; so is every other
// fault, naming the file and the record's offset.
func ReadFile(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tensorboard: %w", err)
	}
	defer f.Close()
	r := &countingReader{r: bufio.NewReader(f)}
	var out []Event
	for {
		at := r.n
		rec, err := ReadRecord(r)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("tensorboard: %s at byte %d: %w", path, at, err)
		}
		e, err := Unmarshal(rec)
		if err != nil {
			return out, fmt.Errorf("tensorboard: %s: event at byte %d: %w", path, at, err)
		}
		out = append(out, e)
	}
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// Files lists the event files in dir (names containing "tfevents", as
// TensorBoard recognises them) in name order, the order TensorBoard reads
// them in.
func Files(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("tensorboard: %w", err)
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() && strings.Contains(e.Name(), "tfevents") {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(out)
	return out, nil
}

// Point is one point of a scalar curve.
type Point struct {
	WallTime float64
	Step     int64
	Value    float32
}

// ReadScalars returns the scalar curves of the event files in dir as
// TensorBoard's data provider shows them: per tag, the simple values in
// the order read (files in name order). The first SessionLog START of the
// directory only marks the start; each later one, at step s, is a restart
// and drops the points read before it with a step ≥ s (TensorBoard's purge
// of orphaned data, how a resumed run replaces the epochs it repeats).
func ReadScalars(dir string) (map[string][]Point, error) {
	files, err := Files(dir)
	if err != nil {
		return nil, err
	}
	out := map[string][]Point{}
	started := false
	for _, p := range files {
		events, err := ReadFile(p)
		if err != nil {
			return nil, err
		}
		for _, e := range events {
			if e.SessionLog == SessionStart {
				if started {
					purge(out, e.Step)
				}
				started = true
			}
			for _, v := range e.Summary {
				out[v.Tag] = append(out[v.Tag], Point{WallTime: e.WallTime, Step: e.Step, Value: v.Simple})
			}
		}
	}
	return out, nil
}

// purge drops the points at step ≥ from.
func purge(curves map[string][]Point, from int64) {
	for tag, pts := range curves {
		kept := pts[:0]
		for _, pt := range pts {
			if pt.Step < from {
				kept = append(kept, pt)
			}
		}
		curves[tag] = kept
	}
}
