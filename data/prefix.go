package data

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/klauspost/compress/gzip"
	"github.com/voxtrain/voxtrain/nifti"
)

// prefixReader decodes the first planes of a 3D NIfTI image and stops: a
// sample whose region ends at plane zhi needs no voxel after it, and gzip
// can only be read from the start, so stopping early is the one saving a
// .nii.gz allows. It reuses its gzip state and buffers between files (one
// per worker).
//
// It handles scalar integer and float datatypes of single files and pairs,
// compressed or not; other files (and 4D images) are read whole by the
// NIfTI reader. It does not verify the gzip checksum, which lies at the
// end: the first read of every case is a whole read through the NIfTI
// reader, which does.
//
// TODO(nifti): this belongs in package nifti as a prefix variant of
// ReadFloat32Into; it is here until that exists.
type prefixReader struct {
	zr  *gzip.Reader
	br  *bufio.Reader
	buf []byte
}

// prefixOK reports whether readPrefix handles files with header h.
func prefixOK(h *nifti.Header) bool {
	switch h.Datatype {
	case nifti.Uint8, nifti.Int8, nifti.Int16, nifti.Uint16, nifti.Int32, nifti.Uint32, nifti.Float32, nifti.Float64:
	default:
		return false
	}
	_, _, err := h.Scaling()
	return err == nil
}

// read decodes the first len(dst) voxels of the image at path (header h,
// from nifti.ReadHeader) into dst, scaled as nifti.ReadFloat32 scales them.
func (p *prefixReader) read(path string, h *nifti.Header, dst []float32) error {
	_, img, err := nifti.Paths(path)
	if err != nil {
		return err
	}
	f, err := os.Open(img)
	if err != nil {
		return fmt.Errorf("read %s: %w", img, err)
	}
	defer f.Close()
	if p.br == nil {
		p.br = bufio.NewReaderSize(f, 64<<10)
	} else {
		p.br.Reset(f)
	}
	var r io.Reader = p.br
	if b, err := p.br.Peek(2); err == nil && b[0] == 0x1f && b[1] == 0x8b {
		if p.zr == nil {
			p.zr, err = gzip.NewReader(p.br)
		} else {
			err = p.zr.Reset(p.br)
		}
		if err != nil {
			return fmt.Errorf("read %s: gzip: %w", img, err)
		}
		r = p.zr
	}
	if _, err := io.CopyN(io.Discard, r, h.VoxOffset); err != nil {
		return fmt.Errorf("read %s: skip to vox_offset %d: %w", img, h.VoxOffset, err)
	}
	slope, inter, _ := h.Scaling()
	scaled := slope != 1 || inter != 0
	size := h.Datatype.Size()
	var order binary.ByteOrder = binary.LittleEndian
	if h.ByteOrder == binary.BigEndian {
		order = binary.BigEndian
	}
	if cap(p.buf) < 64<<10 {
		p.buf = make([]byte, 64<<10)
	}
	per := len(p.buf[:cap(p.buf)]) / size
	for done := 0; done < len(dst); {
		k := min(per, len(dst)-done)
		b := p.buf[:k*size]
		if _, err := io.ReadFull(r, b); err != nil {
			return fmt.Errorf("read %s: voxel data: %w", img, err)
		}
		convertPrefix(h.Datatype, order, b, dst[done:done+k], scaled, slope, inter)
		done += k
	}
	return nil
}

// convertPrefix converts raw voxels of datatype dt to float32, scaling in
// float64 as the NIfTI reader does (so the bytes match a whole read).
func convertPrefix(dt nifti.Datatype, o binary.ByteOrder, b []byte, out []float32, scaled bool, slope, inter float64) {
	var at func(i int) float64
	switch dt {
	case nifti.Uint8:
		at = func(i int) float64 { return float64(b[i]) }
	case nifti.Int8:
		at = func(i int) float64 { return float64(int8(b[i])) }
	case nifti.Int16:
		if !scaled && o == binary.LittleEndian {
			for i := range out { // the common case, unrolled by the compiler
				out[i] = float32(int16(binary.LittleEndian.Uint16(b[2*i:])))
			}
			return
		}
		at = func(i int) float64 { return float64(int16(o.Uint16(b[2*i:]))) }
	case nifti.Uint16:
		at = func(i int) float64 { return float64(o.Uint16(b[2*i:])) }
	case nifti.Int32:
		at = func(i int) float64 { return float64(int32(o.Uint32(b[4*i:]))) }
	case nifti.Uint32:
		at = func(i int) float64 { return float64(o.Uint32(b[4*i:])) }
	case nifti.Float32:
		at = func(i int) float64 { return float64(math.Float32frombits(o.Uint32(b[4*i:]))) }
	case nifti.Float64:
		at = func(i int) float64 { return math.Float64frombits(o.Uint64(b[8*i:])) }
	}
	if !scaled {
		for i := range out {
			out[i] = float32(at(i))
		}
		return
	}
	for i := range out {
		out[i] = float32(at(i)*slope + inter)
	}
}
