package zarr

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
)

// dtype is an element type of a stored array: its kind ('b' bool, 'i'
// signed, 'u' unsigned, 'f' float), its size in bytes and byte order.
type dtype struct {
	kind byte
	size int
	big  bool
}

func (t dtype) String() string {
	o := "<"
	if t.size == 1 {
		o = "|"
	} else if t.big {
		o = ">"
	}
	return fmt.Sprintf("%s%c%d", o, t.kind, t.size)
}

// integer reports whether the type holds integers (label maps).
func (t dtype) integer() bool { return t.kind != 'f' }

// parseV2Dtype reads a NumPy type string of a .zarray ("<f4", "|u1", ">i2").
func parseV2Dtype(s string) (dtype, error) {
	if len(s) != 3 {
		return dtype{}, fmt.Errorf("dtype %q: want a NumPy type string such as \"<f4\" (structured types are not read)", s)
	}
	t := dtype{kind: s[1], size: int(s[2] - '0'), big: s[0] == '>'}
	if s[0] != '<' && s[0] != '>' && s[0] != '|' {
		return dtype{}, fmt.Errorf("dtype %q: byte order %q, want <, > or |", s, s[0])
	}
	if err := t.check(); err != nil {
		return dtype{}, fmt.Errorf("dtype %q: %w", s, err)
	}
	return t, nil
}

func (t dtype) check() error {
	ok := false
	switch t.kind {
	case 'b':
		ok = t.size == 1
	case 'i', 'u':
		ok = t.size == 1 || t.size == 2 || t.size == 4 || t.size == 8
	case 'f':
		ok = t.size == 2 || t.size == 4 || t.size == 8
	}
	if !ok {
		return fmt.Errorf("unsupported element type %c%d", t.kind, t.size)
	}
	return nil
}

// parseNamedDtype reads a Zarr v3 data_type or an N5 dataType ("int16",
// "float32", "bool"); byte order comes from elsewhere (the bytes codec;
// N5 is big-endian).
func parseNamedDtype(s string, big bool) (dtype, error) {
	var t dtype
	switch {
	case s == "bool":
		t = dtype{kind: 'b', size: 1}
	case strings.HasPrefix(s, "uint"):
		t = dtype{kind: 'u', size: bits(s[4:]) / 8}
	case strings.HasPrefix(s, "int"):
		t = dtype{kind: 'i', size: bits(s[3:]) / 8}
	case strings.HasPrefix(s, "float"):
		t = dtype{kind: 'f', size: bits(s[5:]) / 8}
	default:
		return dtype{}, fmt.Errorf("data type %q is not read (want bool, int8..int64, uint8..uint64, float16..float64)", s)
	}
	if err := t.check(); err != nil {
		return dtype{}, fmt.Errorf("data type %q: %w", s, err)
	}
	t.big = big && t.size > 1
	return t, nil
}

func bits(s string) int {
	switch s {
	case "8":
		return 8
	case "16":
		return 16
	case "32":
		return 32
	case "64":
		return 64
	}
	return 0
}

// at returns element i of src (whose type is t) as float32.
func (t dtype) at(src []byte, i int) float32 {
	b := src[i*t.size : i*t.size+t.size]
	var o binary.ByteOrder = binary.LittleEndian
	if t.big {
		o = binary.BigEndian
	}
	switch t.kind {
	case 'b', 'u':
		switch t.size {
		case 1:
			return float32(b[0])
		case 2:
			return float32(o.Uint16(b))
		case 4:
			return float32(o.Uint32(b))
		default:
			return float32(o.Uint64(b))
		}
	case 'i':
		switch t.size {
		case 1:
			return float32(int8(b[0]))
		case 2:
			return float32(int16(o.Uint16(b)))
		case 4:
			return float32(int32(o.Uint32(b)))
		default:
			return float32(int64(o.Uint64(b)))
		}
	default:
		switch t.size {
		case 2:
			return half(o.Uint16(b))
		case 4:
			return math.Float32frombits(o.Uint32(b))
		default:
			return float32(math.Float64frombits(o.Uint64(b)))
		}
	}
}

// u8Float[v] is float32(v): the uint8 conversion as a table.
var u8Float = func() (t [256]float32) {
	for i := range t {
		t[i] = float32(i)
	}
	return t
}()

// convert writes n elements of src, starting at element s and s+ss apart,
// to dst as float32, d apart. The common cases (contiguous little-endian
// runs) have their own loops: this is the inner loop of every read.
func (t dtype) convert(dst []float32, d int, src []byte, s, ss, n int) {
	if d == 1 && ss == 1 && !t.big {
		dst = dst[:n]
		switch {
		case t.kind == 'u' && t.size == 1, t.kind == 'b':
			// A table load is about a third faster than the int-to-float
			// conversion, and uint8 volumes (EM, CT scrolls) are the
			// common large case. Eight at a time, through fixed-length
			// slices, the loop has no bounds checks: 1.7× the plain
			// loop on 64- and 128-voxel runs (BenchmarkConvertUint8).
			src := src[s : s+n]
			for len(src) >= 8 {
				d, v := dst[:8:8], src[:8:8]
				d[0], d[1], d[2], d[3] = u8Float[v[0]], u8Float[v[1]], u8Float[v[2]], u8Float[v[3]]
				d[4], d[5], d[6], d[7] = u8Float[v[4]], u8Float[v[5]], u8Float[v[6]], u8Float[v[7]]
				dst, src = dst[8:], src[8:]
			}
			for i, v := range src {
				dst[i] = u8Float[v]
			}
			return
		case t.kind == 'i' && t.size == 1:
			for i, v := range src[s : s+n] {
				dst[i] = float32(int8(v))
			}
			return
		case t.kind == 'u' && t.size == 2:
			b := src[2*s : 2*(s+n)]
			for i := range dst {
				dst[i] = float32(binary.LittleEndian.Uint16(b[2*i:]))
			}
			return
		case t.kind == 'i' && t.size == 2:
			b := src[2*s : 2*(s+n)]
			for i := range dst {
				dst[i] = float32(int16(binary.LittleEndian.Uint16(b[2*i:])))
			}
			return
		case t.kind == 'f' && t.size == 4:
			b := src[4*s : 4*(s+n)]
			for i := range dst {
				dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
			}
			return
		}
	}
	for i := range n {
		dst[i*d] = t.at(src, s+i*ss)
	}
}

// half converts an IEEE 754 binary16 value.
func half(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | man<<13)
	case exp == 0 && man == 0:
		return math.Float32frombits(sign)
	case exp == 0:
		// Subnormal: normalise the mantissa.
		e := uint32(127 - 15 + 1)
		for man&0x400 == 0 {
			man <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (man&0x3ff)<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}

// fillValue reads a fill_value of metadata: a number, a boolean, null (0),
// "NaN", "Infinity", "-Infinity", or (v3) a hex bit pattern "0x7fc00000".
func fillValue(raw []byte, t dtype) (float32, error) {
	s := strings.TrimSpace(string(raw))
	switch s {
	case "", "null", "false":
		return 0, nil
	case "true":
		return 1, nil
	case `"NaN"`:
		return float32(math.NaN()), nil
	case `"Infinity"`:
		return float32(math.Inf(1)), nil
	case `"-Infinity"`:
		return float32(math.Inf(-1)), nil
	}
	if strings.HasPrefix(s, `"0x`) && strings.HasSuffix(s, `"`) {
		var u uint64
		if _, err := fmt.Sscanf(s[3:len(s)-1], "%x", &u); err != nil || t.kind != 'f' {
			return 0, fmt.Errorf("fill_value %s: a hex pattern wants a float type and hex digits", s)
		}
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], u)
		lt := t
		lt.big = false
		return lt.at(b[:], 0), nil
	}
	var f float64
	if _, err := fmt.Sscan(s, &f); err != nil {
		return 0, fmt.Errorf("fill_value %s: want a number, NaN, Infinity or -Infinity", s)
	}
	return float32(f), nil
}
