// Package floatbytes views float32 slices as their bytes and back, without
// copying: the formats voxtrain writes (safetensors, the prepared store) and
// reads (NIfTI float32) keep little-endian float32, which on a
// little-endian host is the memory itself.
package floatbytes

import "unsafe"

// LittleEndian reports whether the host stores numbers little-endian, so
// the views below are the little-endian encoding.
var LittleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// Bytes views f as its 4·len(f) bytes in the host's order (nil for an
// empty f). Writing either slice changes the other.
func Bytes(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f))
}

// Float32s views b as len(b)/4 float32s in the host's order (nil for fewer
// than 4 bytes); b must be 4-byte aligned, as every buffer Go allocates for
// float32 data, a memory map or a decompressor's output is.
func Float32s(b []byte) []float32 {
	if len(b) < 4 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}
