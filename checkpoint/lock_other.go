//go:build !unix || solaris || aix

package checkpoint

import "os"

// lockFile reports that this system's run directories are not locked
// (flock is not available here).
func lockFile(*os.File) error { return errNoLocks }
