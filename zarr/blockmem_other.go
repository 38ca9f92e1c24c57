//go:build !unix

package zarr

// mapBlock takes n bytes from the Go heap where there is no mmap.
func mapBlock(n int) []byte { return make([]byte, n) }
