//go:build unix

package zarr

import "syscall"

// mapBlock maps n bytes of anonymous memory, outside the Go heap; the Go
// heap when the mapping fails.
func mapBlock(n int) []byte {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return make([]byte, n)
	}
	return b
}
