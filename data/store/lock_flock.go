//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package store

import (
	"errors"
	"os"
	"syscall"
)

// lockDir locks the store folder for the life of a Writer, with an
// advisory flock on the folder itself (no lock file to leave behind, or
// for another user to own), and calls tidy once under the lock. It first
// tries an exclusive lock: when that succeeds no other writer, of any
// process or user, is at work in the folder, and tidy runs with sole true
// before the lock turns shared for as long as the writer lives (so a
// writer arriving later sees the folder in use). Otherwise tidy runs with
// sole false under a shared lock. A filesystem without flock (some network
// mounts) counts as shared. unlock releases the lock.
func lockDir(dir string, tidy func(sole bool)) (unlock func(), err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	fd := int(f.Fd())
	unlock = func() { f.Close() } // closing the descriptor releases the lock
	switch err := flock(fd, syscall.LOCK_EX|syscall.LOCK_NB); {
	case err == nil:
		tidy(true)
		// Now shared. flock may convert in two steps, but this writer has
		// no temporary file yet: a writer slipping in between removes
		// nothing of ours.
		flock(fd, syscall.LOCK_SH)
	case errors.Is(err, syscall.EWOULDBLOCK):
		// Another writer is at work; an exclusive holder only tidies, so
		// waiting for the shared lock is short.
		flock(fd, syscall.LOCK_SH)
		tidy(false)
	default:
		tidy(false) // no flock here: assume company
	}
	return unlock, nil
}

// flock is syscall.Flock retried when a signal interrupts it.
func flock(fd, how int) error {
	for {
		err := syscall.Flock(fd, how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
