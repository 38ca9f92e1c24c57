// Package samepath tells whether two paths name the same file or folder,
// for commands that must not write their output over an input.
package samepath

import (
	"os"
	"path/filepath"
)

// Same reports whether paths a and b name the same file or folder: the
// same path once made absolute, or, when both exist, the same file
// through a link (os.SameFile).
func Same(a, b string) bool {
	aa, err1 := filepath.Abs(a)
	ab, err2 := filepath.Abs(b)
	if err1 == nil && err2 == nil && aa == ab {
		return true
	}
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}
