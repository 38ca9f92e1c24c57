// The ops' working memory and the host↔device copies of their small
// arguments and results: reused scratch buffers, and the byte encodings of
// float32, float64 and int32 values.

package core

import (
	"encoding/binary"
	"fmt"
	"math"
)

// need returns a reused buffer of at least n bytes, or false after
// recording an allocation failure.
func (d *Device[B]) need(op string, b *buffer[B], n int) (B, bool) {
	p, err := b.ensure(&d.cache, max(n, 8))
	if err != nil {
		d.fail(op, err)
		return p, false
	}
	return p, true
}

// write copies host values to device memory on the compute stream.
func (d *Device[B]) write(op string, dst B, src []byte) bool {
	if err := d.machine.Write(dst, src); err != nil {
		d.fail(op, fmt.Errorf("copy %d bytes to the device: %w", len(src), err))
		return false
	}
	return true
}

// read copies device memory to the host once the compute stream is there.
func (d *Device[B]) read(op string, dst []byte, src B) bool {
	if err := d.machine.Read(dst, src); err != nil {
		d.fail(op, fmt.Errorf("copy %d bytes from the device: %w", len(dst), err))
		return false
	}
	return true
}

// f32Bytes returns the little-endian bytes of float32s (CUDA devices are
// little-endian, as are the hosts voxtrain supports).
func f32Bytes(xs ...[]float32) []byte {
	n := 0
	for _, x := range xs {
		n += len(x)
	}
	b := make([]byte, 0, 4*n)
	for _, x := range xs {
		for _, v := range x {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
	}
	return b
}

// f64s decodes little-endian float64s.
func f64s(b []byte) []float64 {
	out := make([]float64, len(b)/8)
	for i := range out {
		out[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out
}

// i32At decodes the little-endian int32 at index i.
func i32At(b []byte, i int) int32 { return int32(binary.LittleEndian.Uint32(b[4*i:])) }

// BF16Bits rounds f to bfloat16 as the kernels' f32_to_bf16 does (to
// nearest, ties to even; NaNs stay NaN, quieted): for uploads into bf16
// tensors, converted on the host.
func BF16Bits(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x0040
	}
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}

// BF16Float returns the float32 value of bfloat16 bits h (exact).
func BF16Float(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// EncodeHost returns the bytes a tensor of t's element type holds for the
// float32 values src: their little-endian float32 patterns, or for a bf16
// tensor their bf16 roundings.
func EncodeHost[B comparable](t *Tensor[B], src []float32) []byte {
	if !t.bf16 {
		return f32Bytes(src)
	}
	b := make([]byte, 2*len(src))
	for i, v := range src {
		binary.LittleEndian.PutUint16(b[2*i:], BF16Bits(v))
	}
	return b
}

// DecodeHost writes into dst the float32 values of b, the bytes of a
// tensor of t's element type (EncodeHost's inverse for bf16 values).
func DecodeHost[B comparable](t *Tensor[B], dst []float32, b []byte) {
	for i := range dst {
		if t.bf16 {
			dst[i] = BF16Float(binary.LittleEndian.Uint16(b[2*i:]))
		} else {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	}
}
