package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"
)

// LockName is the name of the lock file in a run directory.
const LockName = "train.lock"

// Holder is what a run directory's lock file says about the process that
// holds the lock, for the error another process gets.
type Holder struct {
	PID     int       `json:"pid"`
	Host    string    `json:"host"`
	Started time.Time `json:"started"`
}

// LockedError is Lock's error when another process holds the run
// directory's lock.
type LockedError struct {
	Dir string
	// Holder is what the lock file said; zero when it said nothing
	// readable (the holder was just starting or just ending).
	Holder Holder
}

func (e *LockedError) Error() string {
	h := e.Holder
	if h.PID == 0 {
		return fmt.Sprintf("run directory %s is locked by another training (its lock file does not say which: it is starting or ending)", e.Dir)
	}
	return fmt.Sprintf("run directory %s is locked by another training: pid %d on host %s, since %s",
		e.Dir, h.PID, h.Host, h.Started.Local().Format(time.DateTime))
}

// RunLock is a run directory's lock, held from Lock to Release.
type RunLock struct {
	f *os.File // nil: nothing held
	// Warning is set when the filesystem cannot lock files: the run goes
	// on without the lock (refusing to train there would be worse), and
	// the caller should say so.
	Warning string
}

// errWouldBlock and errNoLocks are what lockFile reports besides success
// and other errors: another descriptor holds the lock; the system or the
// filesystem has no locks.
var (
	errWouldBlock = errors.New("locked")
	errNoLocks    = errors.New("file locks not supported")
)

// Lock takes the run directory's lock, so that one process at a time
// writes into it (two trainings in one run directory would prune each
// other's checkpoints and interleave metrics.jsonl). It creates the
// directory itself if missing, but none of its contents besides the lock
// file, and writes this process's PID, host and start time into the file.
// When another process holds the lock it returns a *LockedError naming
// that process.
//
// The lock is an advisory flock(2) on the file, not the file's existence:
// the kernel releases it when its holder exits, however it exits, so the
// file a killed training leaves behind blocks nobody. Read-only uses of a
// run (validation, prediction, plots) neither take nor heed it.
func (r RunDir) Lock() (*RunLock, error) {
	if err := os.MkdirAll(r.Path, 0o755); err != nil {
		return nil, fmt.Errorf("create run directory: %w", err)
	}
	f, err := os.OpenFile(r.LockFile, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock run directory: %w", err)
	}
	switch err := lockFile(f); {
	case err == nil:
	case errors.Is(err, errWouldBlock):
		f.Close()
		return nil, &LockedError{Dir: r.Path, Holder: readHolder(r.LockFile)}
	case errors.Is(err, errNoLocks):
		f.Close()
		return &RunLock{Warning: fmt.Sprintf("run directory %s is not locked (%v): nothing stops a second training from writing into it", r.Path, err)}, nil
	default:
		f.Close()
		return nil, fmt.Errorf("lock run directory %s: %w", r.Path, err)
	}
	host, _ := os.Hostname()
	b, err := json.Marshal(Holder{PID: os.Getpid(), Host: host, Started: time.Now().UTC().Truncate(time.Second)})
	if err == nil {
		// Truncate first: a killed holder's longer line must not show
		// through. The lock is ours already, so no other writer races.
		if err = f.Truncate(0); err == nil {
			_, err = f.WriteAt(append(b, '\n'), 0)
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock run directory: write %s: %w", r.LockFile, err)
	}
	return &RunLock{f: f}, nil
}

// Release gives the lock up. The file stays (removing it would let a
// process that opened it just before lock an unlinked file while a third
// locks a new one); it is emptied so that it no longer names this
// process. Release is safe on a nil lock and more than once.
func (l *RunLock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	f.Truncate(0) // best effort: only the message of a later refusal depends on it
	// Closing the only descriptor releases the flock.
	if err := f.Close(); err != nil {
		return fmt.Errorf("release run directory lock: %w", err)
	}
	return nil
}

// readHolder reads the lock file's holder. The holder writes it just after
// it takes the lock, so an empty or partial file is retried for a moment
// before giving up.
func readHolder(path string) Holder {
	for range 20 {
		var h Holder
		if b, err := os.ReadFile(path); err == nil && json.Unmarshal(b, &h) == nil && h.PID != 0 {
			return h
		}
		time.Sleep(25 * time.Millisecond)
	}
	return Holder{}
}
