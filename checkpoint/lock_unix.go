//go:build unix && !solaris && !aix

package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockFile takes an exclusive flock on f without waiting. flock, not
// fcntl: fcntl locks belong to the process, so a second open in the same
// process would not conflict, and closing any descriptor of the file would
// drop them.
func lockFile(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.EWOULDBLOCK):
		return errWouldBlock
	case errors.Is(err, syscall.ENOSYS), errors.Is(err, syscall.EOPNOTSUPP), errors.Is(err, syscall.ENOLCK):
		// Filesystems mounted without lock support (Lustre without
		// -o flock, NFS without a lock daemon).
		return fmt.Errorf("%w: %w", errNoLocks, err)
	}
	return err
}
