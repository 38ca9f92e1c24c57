//go:build unix

package store

import (
	"os"
	"syscall"
)

// mapFile maps f read-only and shared (populated where the system can, see
// populateFlag): pages come from the page cache, so every reader of a raw
// store shares one copy of it.
func mapFile(f *os.File) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() == 0 {
		return nil, nil
	}
	return syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED|populateFlag)
}

func unmapFile(b []byte) error { return syscall.Munmap(b) }
