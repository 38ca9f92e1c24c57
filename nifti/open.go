package nifti

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
)

// open opens a NIfTI path (a single file, or either member of a pair),
// reads the header and extensions, and positions the stream at the voxels.
func (r *Reader) open(path string) (*source, error) {
	hdrPath, imgPath, err := Paths(path)
	if err != nil {
		// A folder given where a file belongs (`train info imagesTr`) is
		// told as such, not as a file with an unknown extension.
		if fi, serr := os.Stat(path); serr == nil && fi.IsDir() {
			return nil, fmt.Errorf("nifti: %s is a directory, not a NIfTI file", path)
		}
		return nil, err
	}
	f, err := os.Open(hdrPath)
	if err != nil {
		return nil, fmt.Errorf("nifti: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("nifti: %w", err)
	}
	if st.IsDir() {
		f.Close()
		return nil, fmt.Errorf("nifti: %s is a directory, not a NIfTI file", hdrPath)
	}
	if hdrPath == imgPath {
		src, err := r.openStream(f, st.Size(), hdrPath, f)
		if err != nil {
			f.Close()
			return nil, err
		}
		return src, nil
	}
	// A pair: the header (and its extensions) from .hdr, voxels from .img.
	hsrc, err := r.openHeaderStream(f, st.Size(), hdrPath, true)
	f.Close()
	if err != nil {
		return nil, err
	}
	hdr := hsrc.hdr
	g, err := os.Open(imgPath)
	if err != nil {
		return nil, fmt.Errorf("nifti: image file of pair %s: %w", hdrPath, err)
	}
	gst, err := g.Stat()
	if err != nil {
		g.Close()
		return nil, fmt.Errorf("nifti: %w", err)
	}
	src, err := r.newSource(g, gst.Size(), imgPath)
	if err != nil {
		g.Close()
		return nil, err
	}
	src.hdr = hdr
	src.closers = append(src.closers, g)
	if err := checkFits(imgPath, hdr, hdr.VoxOffset, src.limit, src.gz != nil); err != nil {
		g.Close()
		return nil, err
	}
	if err := src.skipTo(hdr.VoxOffset); err != nil {
		g.Close()
		return nil, err
	}
	return src, nil
}

// sniffGzip reports whether the buffered stream starts with the gzip magic.
func sniffGzip(br *bufio.Reader) bool {
	b, err := br.Peek(2)
	return err == nil && b[0] == 0x1f && b[1] == 0x8b
}

// checkFits rejects a header whose data cannot be in a stream of at most
// limit bytes, before anything is allocated for it.
func checkFits(name string, h *Header, voxOffset, limit int64, gz bool) error {
	need := h.DataSize()
	if voxOffset > math.MaxInt64-need {
		return fieldErr(name, h.Version, fVoxOff, "vox_offset %d + data size %d overflows", voxOffset, need)
	}
	if voxOffset+need <= limit {
		return nil
	}
	if gz {
		if voxOffset > limit {
			return fieldErr(name, h.Version, fVoxOff, "vox_offset %d is past the end of what this gzip file can hold (at most %d bytes decompressed)", voxOffset, limit)
		}
		return fieldErr(name, h.Version, fDim, "dims %v × %d bytes need %d bytes of voxel data at offset %d, more than this gzip file can hold or than the cap allows (at most %d bytes decompressed; raise Reader.MaxGzipBytes for larger files)",
			h.Shape(), h.Datatype.Size(), need, voxOffset, limit)
	}
	if voxOffset > limit {
		return fieldErr(name, h.Version, fVoxOff, "vox_offset %d is past the end of the file (%d bytes)", voxOffset, limit)
	}
	return &FormatError{File: name, Field: "data", Offset: voxOffset,
		Msg: fmt.Sprintf("truncated: dims %v × %d bytes need %d bytes from offset %d, but the file has only %d bytes there", h.Shape(), h.Datatype.Size(), need, voxOffset, limit-voxOffset)}
}

// openHeaderStream reads the header and extensions from r (a file or
// memory), returning a source positioned just after what it consumed.
func (r *Reader) openHeaderStream(rd io.Reader, size int64, name string, pair bool) (*source, error) {
	src, err := r.newSource(rd, size, name)
	if err != nil {
		return nil, err
	}
	var first [Nifti2HeaderSize]byte
	n, err := io.ReadFull(src.r, first[:4])
	src.pos += int64(n)
	if err != nil {
		return nil, src.readErr("sizeof_hdr", err, Nifti1HeaderSize)
	}
	// An unknown sizeof_hdr reads no further: ParseHeader reports it.
	hsize := headerSize(first[:4])
	if hsize > 4 {
		n, err = io.ReadFull(src.r, first[4:hsize])
		src.pos += int64(n)
		if err != nil {
			return nil, src.readErr("header", err, int64(hsize))
		}
	}
	h, err := ParseHeader(first[:hsize], name)
	if err != nil {
		return nil, err
	}
	src.hdr = h
	// The 4-byte extension flag follows the header in .nii files and,
	// optionally, in .hdr files.
	var flag [extFlagSize]byte
	n, err = io.ReadFull(src.r, flag[:])
	src.pos += int64(n)
	if err != nil {
		if pair && (err == io.EOF || err == io.ErrUnexpectedEOF) {
			return src, nil // a bare 348-byte .hdr is fine
		}
		return nil, src.readErr("extension flag", err, int64(hsize+extFlagSize))
	}
	if flag[0] == 0 {
		return src, nil
	}
	// Extensions run up to vox_offset in a single file, to the end in a
	// .hdr. They are optional metadata, so a malformed one ends the list.
	end := h.VoxOffset
	if pair || end <= src.pos {
		end = min(src.limit, src.pos+(64<<20))
	}
	for src.pos+8 <= end {
		var eh [8]byte
		n, err := io.ReadFull(src.r, eh[:])
		src.pos += int64(n)
		if err != nil {
			if pair && (err == io.EOF || err == io.ErrUnexpectedEOF) {
				return src, nil
			}
			return nil, src.readErr("extension", err, src.pos)
		}
		esize := int64(int32(h.ByteOrder.Uint32(eh[:4])))
		ecode := int32(h.ByteOrder.Uint32(eh[4:]))
		if esize < 8 || src.pos-8+esize > end {
			// Not a valid extension: stop; the data offset is authoritative.
			break
		}
		data := make([]byte, esize-8)
		n, err = io.ReadFull(src.r, data)
		src.pos += int64(n)
		if err != nil {
			return nil, src.readErr("extension", err, src.pos)
		}
		h.Extensions = append(h.Extensions, Extension{Code: ecode, Data: data})
	}
	return src, nil
}

// openStream opens a single-file NIfTI image (.nii or .nii.gz) and positions
// it at the voxel data. closer, if not nil, is closed with the source.
func (r *Reader) openStream(rd io.Reader, size int64, name string, closer io.Closer) (*source, error) {
	src, err := r.openHeaderStream(rd, size, name, false)
	if err != nil {
		return nil, err
	}
	if closer != nil {
		src.closers = append(src.closers, closer)
	}
	h := src.hdr
	minOff := int64(Nifti1HeaderSize + extFlagSize)
	if h.Version == 2 {
		minOff = Nifti2HeaderSize + extFlagSize
	}
	off := h.VoxOffset
	if off == 0 {
		off = max(minOff, src.pos)
	} else if off < minOff {
		return nil, fieldErr(name, h.Version, fVoxOff, "%d is inside the header; a single-file NIfTI-%d needs at least %d", off, h.Version, minOff)
	}
	if err := checkFits(name, h, off, src.limit, src.gz != nil); err != nil {
		return nil, err
	}
	if err := src.skipTo(off); err != nil {
		return nil, err
	}
	return src, nil
}
