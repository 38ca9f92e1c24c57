package nifti

import (
	"encoding/binary"
	"math"
)

// convert decodes len(dst) scalar voxels of type dt from src (in the file's
// byte order) into float32, applying slope and intercept in float64 when
// scaled, as nibabel does, so large integers keep their precision until the
// final rounding to float32.
func convert(dt Datatype, le bool, src []byte, dst []float32, slope, inter float64, scaled bool) {
	if !scaled && convertFast(dt, le, src, dst) {
		return
	}
	at := scalarAt(dt, le, src)
	if !scaled {
		// Wide types: float64 → float32 is the single rounding.
		for i := range dst {
			dst[i] = float32(at(i))
		}
		return
	}
	for i := range dst {
		dst[i] = float32(at(i)*slope + inter)
	}
}

// convertFast is the unscaled conversion of the common narrow types with
// the loads written out (no per-voxel call); it reports false for the
// other types.
func convertFast(dt Datatype, le bool, src []byte, dst []float32) bool {
	switch {
	case dt == Uint8:
		src := src[:len(dst)]
		for i := range dst {
			dst[i] = float32(src[i])
		}
	case dt == Int8:
		for i := range dst {
			dst[i] = float32(int8(src[i]))
		}
	case dt == Int16 && le:
		convert16LE[int16](src, dst)
	case dt == Int16:
		for i := range dst {
			dst[i] = float32(int16(binary.BigEndian.Uint16(src[2*i:])))
		}
	case dt == Uint16 && le:
		convert16LE[uint16](src, dst)
	case dt == Uint16:
		for i := range dst {
			dst[i] = float32(binary.BigEndian.Uint16(src[2*i:]))
		}
	case dt == Float32:
		for i := range dst {
			dst[i] = math.Float32frombits(u32(src[4*i:], le))
		}
	default:
		return false
	}
	return true
}

// scalarAt returns a reader of stored value i of b (voxels of type dt in
// the given byte order; for RGB types, component bytes) as float64: the
// general path of convert and the statistics of Summarize.
func scalarAt(dt Datatype, le bool, b []byte) func(i int) float64 {
	switch dt {
	case Int8:
		return func(i int) float64 { return float64(int8(b[i])) }
	case Int16:
		return func(i int) float64 { return float64(int16(u16(b[2*i:], le))) }
	case Uint16:
		return func(i int) float64 { return float64(u16(b[2*i:], le)) }
	case Int32:
		return func(i int) float64 { return float64(int32(u32(b[4*i:], le))) }
	case Uint32:
		return func(i int) float64 { return float64(u32(b[4*i:], le)) }
	case Int64:
		return func(i int) float64 { return float64(int64(u64(b[8*i:], le))) }
	case Uint64:
		return func(i int) float64 { return float64(u64(b[8*i:], le)) }
	case Float32:
		return func(i int) float64 { return float64(math.Float32frombits(u32(b[4*i:], le))) }
	case Float64:
		return func(i int) float64 { return math.Float64frombits(u64(b[8*i:], le)) }
	}
	return func(i int) float64 { return float64(b[i]) } // Uint8, RGB24, RGBA32
}

func u16(b []byte, le bool) uint16 {
	if le {
		return binary.LittleEndian.Uint16(b)
	}
	return binary.BigEndian.Uint16(b)
}

func u32(b []byte, le bool) uint32 {
	if le {
		return binary.LittleEndian.Uint32(b)
	}
	return binary.BigEndian.Uint32(b)
}

func u64(b []byte, le bool) uint64 {
	if le {
		return binary.LittleEndian.Uint64(b)
	}
	return binary.BigEndian.Uint64(b)
}

// convert16LE converts little-endian 16-bit voxels (the common MRI and CT
// types) eight a step through fixed-length subslices, so the loads carry
// no per-voxel bounds check: 2-3x faster than one voxel a step.
func convert16LE[T int16 | uint16](src []byte, dst []float32) {
	full := len(dst) - len(dst)%8
	src = src[:2*len(dst)]
	for i := 0; i < full; i += 8 {
		d := dst[i : i+8 : i+8]
		b := src[2*i : 2*i+16 : 2*i+16]
		for k := range 8 {
			d[k] = float32(T(uint16(b[2*k]) | uint16(b[2*k+1])<<8))
		}
	}
	for i := full; i < len(dst); i++ {
		dst[i] = float32(T(binary.LittleEndian.Uint16(src[2*i:])))
	}
}
