package nifti

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/voxtrain/voxtrain/internal/floatbytes"
)

// float32s decodes the voxels into dst (allocated when nil) in one pass
// through a small bounce buffer: the (decompressed) stream is read in chunks
// and each chunk converted into its place in dst.
func (s *source) float32s(dst []float32) ([]float32, error) {
	return s.decode(dst, s.hdr.NumVoxels())
}

// decode converts the first nvox voxels; when that is the whole image it
// also verifies the gzip trailer.
func (s *source) decode(dst []float32, nvox int64) ([]float32, error) {
	h := s.hdr
	info := dtTable[h.Datatype]
	whole := nvox == h.NumVoxels()
	if h.Datatype == Complex64 || h.Datatype == Complex128 {
		return nil, &FormatError{File: s.name, Field: "datatype", Offset: fDatatype.at(h.Version),
			Msg: fmt.Sprintf("%v voxels cannot be converted to float32; read them raw", h.Datatype)}
	}
	slope, inter, err := h.Scaling()
	if err != nil {
		return nil, &FormatError{File: s.name, Field: "scl_slope", Offset: map[int]int64{1: 112, 2: 176}[h.Version], Msg: err.Error()}
	}
	nout := nvox * int64(info.ncomp)
	if dst == nil {
		dst = make([]float32, nout)
	} else if int64(len(dst)) != nout {
		return nil, fmt.Errorf("nifti: %s: destination holds %d values, the image has %d", s.name, len(dst), nout)
	}
	le := h.ByteOrder != binary.BigEndian
	scaled := slope != 1 || inter != 0
	if h.Datatype == Float32 && le && floatbytes.LittleEndian && len(dst) > 0 {
		// Fast path: the stream's bytes are the destination's bytes.
		b := floatbytes.Bytes(dst)
		n, err := io.ReadFull(s.r, b)
		s.pos += int64(n)
		if err != nil {
			return nil, s.readErr("data", err, s.pos-int64(n)+int64(len(b)))
		}
		if scaled {
			for i, v := range dst {
				dst[i] = float32(float64(v)*slope + inter)
			}
		}
		if !whole {
			return dst, nil
		}
		return dst, s.finish()
	}
	const chunk = 64 << 10
	vsz := info.size
	per := chunk / vsz
	buf := make([]byte, per*vsz)
	for done := int64(0); done < nvox; {
		k := min(int64(per), nvox-done)
		b := buf[:k*int64(vsz)]
		n, err := io.ReadFull(s.r, b)
		s.pos += int64(n)
		if err != nil {
			return nil, s.readErr("data", err, s.pos-int64(n)+int64(len(b)))
		}
		if info.scalar {
			convert(h.Datatype, le, b, dst[done:done+k], slope, inter, scaled)
		} else {
			// RGB24 / RGBA32: planar channels.
			for c := 0; c < info.ncomp; c++ {
				out := dst[int64(c)*nvox+done : int64(c)*nvox+done+k]
				for i := range out {
					out[i] = float32(float64(b[i*vsz+c])*slope + inter)
				}
			}
		}
		done += k
	}
	if !whole {
		return dst, nil
	}
	return dst, s.finish()
}

// swapInPlace reverses the bytes of each comp-byte component of b.
func swapInPlace(b []byte, comp int) {
	switch comp {
	case 2:
		for i := 0; i+1 < len(b); i += 2 {
			b[i], b[i+1] = b[i+1], b[i]
		}
	case 4:
		for i := 0; i+3 < len(b); i += 4 {
			binary.LittleEndian.PutUint32(b[i:], binary.BigEndian.Uint32(b[i:]))
		}
	case 8:
		for i := 0; i+7 < len(b); i += 8 {
			binary.LittleEndian.PutUint64(b[i:], binary.BigEndian.Uint64(b[i:]))
		}
	}
}
