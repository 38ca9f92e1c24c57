// Protocol buffers' wire format, the part ONNX files use: varints,
// fixed 32-bit floats and length-delimited fields (strings, bytes,
// packed repeated scalars, nested messages). See
// https://protobuf.dev/programming-guides/encoding/.

package onnx

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Wire types.
const (
	wireVarint = 0
	wireI64    = 1
	wireLen    = 2
	wireI32    = 5
)

// encoder appends fields to a message's bytes. Fields are written in the
// order the methods are called; the Marshal methods call them in field
// number order, as protobuf's own serialisers do, so a file is the same
// bytes whichever tool re-encodes it.
type encoder struct{ b []byte }

func (e *encoder) tag(field, wire int) {
	e.b = binary.AppendUvarint(e.b, uint64(field)<<3|uint64(wire))
}

// int64 writes an int64 (or int32, or enum) field; negative values take
// ten bytes, as protobuf encodes them (two's complement, not zigzag).
func (e *encoder) int64(field int, v int64) {
	e.tag(field, wireVarint)
	e.b = binary.AppendUvarint(e.b, uint64(v))
}

// float32 writes a float field (fixed 32-bit, little-endian).
func (e *encoder) float32(field int, v float32) {
	e.tag(field, wireI32)
	e.b = binary.LittleEndian.AppendUint32(e.b, math.Float32bits(v))
}

// bytes writes a string, bytes or nested message field.
func (e *encoder) bytes(field int, v []byte) {
	e.tag(field, wireLen)
	e.b = binary.AppendUvarint(e.b, uint64(len(v)))
	e.b = append(e.b, v...)
}

func (e *encoder) string(field int, v string) { e.bytes(field, []byte(v)) }

// optString writes a string field unless it is empty: proto2's optional
// fields that ONNX files leave out when unset.
func (e *encoder) optString(field int, v string) {
	if v != "" {
		e.string(field, v)
	}
}

// message writes a nested message field.
func (e *encoder) message(field int, m interface{ marshal(*encoder) }) {
	var sub encoder
	m.marshal(&sub)
	e.bytes(field, sub.b)
}

// decoder reads one message's fields in turn.
type decoder struct {
	b   []byte
	off int // of b in the whole file, for error messages
}

// field is one field as read: its number and wire type, and its value
// (the varint or fixed value in u, or the length-delimited bytes in b).
type field struct {
	num, wire int
	u         uint64
	b         []byte
	at        int // file offset of the field's tag
	bodyAt    int // file offset of b
}

var errTruncated = errors.New("truncated")

func (d *decoder) uvarint() (uint64, error) {
	v, n := binary.Uvarint(d.b)
	switch {
	case n == 0:
		return 0, errTruncated
	case n < 0:
		return 0, errors.New("varint overflows 64 bits")
	}
	d.b, d.off = d.b[n:], d.off+n
	return v, nil
}

// next reads the next field; ok is false at the end of the message.
func (d *decoder) next() (f field, ok bool, err error) {
	if len(d.b) == 0 {
		return field{}, false, nil
	}
	f.at = d.off
	t, err := d.uvarint()
	if err != nil {
		return f, false, fmt.Errorf("byte %d: tag: %w", f.at, err)
	}
	if t>>3 == 0 || t>>3 > math.MaxInt32 {
		return f, false, fmt.Errorf("byte %d: field number %d", f.at, t>>3)
	}
	f.num, f.wire = int(t>>3), int(t&7)
	switch f.wire {
	case wireVarint:
		f.u, err = d.uvarint()
	case wireI64:
		if len(d.b) < 8 {
			err = errTruncated
			break
		}
		f.u = binary.LittleEndian.Uint64(d.b)
		d.b, d.off = d.b[8:], d.off+8
	case wireI32:
		if len(d.b) < 4 {
			err = errTruncated
			break
		}
		f.u = uint64(binary.LittleEndian.Uint32(d.b))
		d.b, d.off = d.b[4:], d.off+4
	case wireLen:
		var n uint64
		if n, err = d.uvarint(); err == nil {
			if n > uint64(len(d.b)) {
				err = fmt.Errorf("length %d past the end (%d bytes left)", n, len(d.b))
				break
			}
			f.b, f.bodyAt = d.b[:n], d.off
			d.b, d.off = d.b[n:], d.off+int(n)
		}
	default:
		err = fmt.Errorf("wire type %d not supported (groups are not used by ONNX)", f.wire)
	}
	if err != nil {
		return f, false, fmt.Errorf("byte %d: field %d: %w", f.at, f.num, err)
	}
	return f, true, nil
}

// want checks a field's wire type.
func (f field) want(wire int, msg, name string) error {
	if f.wire != wire {
		return fmt.Errorf("byte %d: %s.%s (field %d): wire type %d, want %d", f.at, msg, name, f.num, f.wire, wire)
	}
	return nil
}

// sub returns a decoder for a nested message field's bytes.
func (f field) sub() *decoder { return &decoder{b: f.b, off: f.bodyAt} }

// int64s reads a repeated int64 field, packed or not: a packed field
// holds varints back to back, an unpacked one is a single varint.
func (f field) int64s() ([]int64, error) {
	if f.wire == wireVarint {
		return []int64{int64(f.u)}, nil
	}
	if f.wire != wireLen {
		return nil, fmt.Errorf("byte %d: field %d: wire type %d for repeated int64", f.at, f.num, f.wire)
	}
	d := f.sub()
	var out []int64
	for len(d.b) > 0 {
		v, err := d.uvarint()
		if err != nil {
			return nil, fmt.Errorf("byte %d: field %d: packed int64: %w", d.off, f.num, err)
		}
		out = append(out, int64(v))
	}
	return out, nil
}

// float32s reads a repeated float field, packed or not.
func (f field) float32s() ([]float32, error) {
	if f.wire == wireI32 {
		return []float32{math.Float32frombits(uint32(f.u))}, nil
	}
	if f.wire != wireLen || len(f.b)%4 != 0 {
		return nil, fmt.Errorf("byte %d: field %d: wire type %d, %d bytes for repeated float", f.at, f.num, f.wire, len(f.b))
	}
	out := make([]float32, len(f.b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(f.b[4*i:]))
	}
	return out, nil
}
