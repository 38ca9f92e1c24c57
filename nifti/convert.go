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
	switch dt {
	case Uint8:
		if !scaled {
			for i := range dst {
				dst[i] = float32(src[i])
			}
			return
		}
		conv(dst, scaled, slope, inter, func(i int) float64 { return float64(src[i]) })
	case Int8:
		if !scaled {
			for i := range dst {
				dst[i] = float32(int8(src[i]))
			}
			return
		}
		conv(dst, scaled, slope, inter, func(i int) float64 { return float64(int8(src[i])) })
	case Int16:
		if !scaled {
			if le {
				for i := range dst {
					dst[i] = float32(int16(binary.LittleEndian.Uint16(src[2*i:])))
				}
			} else {
				for i := range dst {
					dst[i] = float32(int16(binary.BigEndian.Uint16(src[2*i:])))
				}
			}
			return
		}
		conv(dst, scaled, slope, inter, func(i int) float64 { return float64(int16(u16(src[2*i:], le))) })
	case Uint16:
		if !scaled {
			if le {
				for i := range dst {
					dst[i] = float32(binary.LittleEndian.Uint16(src[2*i:]))
				}
			} else {
				for i := range dst {
					dst[i] = float32(binary.BigEndian.Uint16(src[2*i:]))
				}
			}
			return
		}
		conv(dst, scaled, slope, inter, func(i int) float64 { return float64(u16(src[2*i:], le)) })
	case Int32:
		conv(dst, scaled, slope, inter, func(i int) float64 { return float64(int32(u32(src[4*i:], le))) })
	case Uint32:
		conv(dst, scaled, slope, inter, func(i int) float64 { return float64(u32(src[4*i:], le)) })
	case Int64:
		conv(dst, scaled, slope, inter, func(i int) float64 { return float64(int64(u64(src[8*i:], le))) })
	case Uint64:
		conv(dst, scaled, slope, inter, func(i int) float64 { return float64(u64(src[8*i:], le)) })
	case Float32:
		if !scaled {
			for i := range dst {
				dst[i] = math.Float32frombits(u32(src[4*i:], le))
			}
			return
		}
		conv(dst, scaled, slope, inter, func(i int) float64 { return float64(math.Float32frombits(u32(src[4*i:], le))) })
	case Float64:
		conv(dst, scaled, slope, inter, func(i int) float64 { return math.Float64frombits(u64(src[8*i:], le)) })
	}
}

// conv is the general (scaled or wide-type) path; the fast unscaled paths for
// the common narrow types are written out in convert. Integers wider than 24
// bits go through float64 so rounding happens once.
func conv(dst []float32, scaled bool, slope, inter float64, at func(int) float64) {
	if !scaled {
		// Callers that have a specialised unscaled loop return before this;
		// for the others, float64 → float32 is the single rounding.
		for i := range dst {
			dst[i] = float32(at(i))
		}
		return
	}
	for i := range dst {
		dst[i] = float32(at(i)*slope + inter)
	}
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
