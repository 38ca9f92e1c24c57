package nifti

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"unsafe"

	"github.com/voxtrain/voxtrain/internal/inflate"
)

// DefaultMaxGzipBytes is the default cap on the decompressed size of a
// gzipped file's header, extensions and voxel data: 2 GiB.
const DefaultMaxGzipBytes int64 = 2 << 30

// maxDeflateRatio bounds how much a deflate stream can expand (1032:1 is
// deflate's theoretical maximum), so a header that claims more data than a
// gzip file of that size can hold is rejected before any allocation.
const maxDeflateRatio = 1032

// Reader reads NIfTI files. The zero value is ready to use.
type Reader struct {
	// MaxGzipBytes caps the decompressed size of a gzipped file (header,
	// extensions and voxel data); 0 means DefaultMaxGzipBytes. A header that
	// describes more data than this is an error, reported before anything is
	// allocated for the voxels.
	MaxGzipBytes int64
}

func (r *Reader) gzipCap() int64 {
	if r == nil || r.MaxGzipBytes <= 0 {
		return DefaultMaxGzipBytes
	}
	return r.MaxGzipBytes
}

// ReadHeader reads and validates the header (and extensions) of a NIfTI file.
func ReadHeader(path string) (*Header, error) { return (&Reader{}).ReadHeader(path) }

// ReadFloat32 reads a NIfTI file's voxels as float32, scaled by
// scl_slope/scl_inter as nibabel does, in file order (x fastest; a 4D volume
// has its 4th axis slowest). RGB24/RGBA32 voxels come back as 3/4 planar
// channels (all R values, then all G, ...), each in file order; complex data
// is an error (read it with ReadRaw).
func ReadFloat32(path string) (*Header, []float32, error) {
	return (&Reader{}).ReadFloat32(path)
}

// ReadRaw reads a NIfTI file's voxel bytes unscaled, in file order,
// converted to little-endian.
func ReadRaw(path string) (*Header, []byte, error) { return (&Reader{}).ReadRaw(path) }

// ReadHeader reads and validates the header (and extensions) of a NIfTI file.
func (r *Reader) ReadHeader(path string) (*Header, error) {
	src, err := r.open(path)
	if err != nil {
		return nil, err
	}
	src.close()
	return src.hdr, nil
}

// ReadFloat32 is the package-level ReadFloat32 with this Reader's limits.
func (r *Reader) ReadFloat32(path string) (*Header, []float32, error) {
	src, err := r.open(path)
	if err != nil {
		return nil, nil, err
	}
	defer src.close()
	out, err := src.float32s(nil)
	if err != nil {
		return nil, nil, err
	}
	return src.hdr, out, nil
}

// ReadFloat32Into is ReadFloat32 decoding into dst, which must hold exactly
// the number of values ReadFloat32 would return (voxels × components); it
// lets a caller reuse one buffer across files.
func (r *Reader) ReadFloat32Into(path string, dst []float32) (*Header, error) {
	return r.readWith(path, func(f *File) error { return f.ReadFloat32Into(dst) })
}

// ReadFloat32Prefix decodes only the first len(dst) values of a scalar
// image (file order, scaled as ReadFloat32 scales them) and stops reading:
// a crop that ends at plane z of a .nii.gz needs nothing after it, and a
// gzip stream can only be read from its start, so stopping early is the
// saving. The gzip checksum at the end of the stream is not verified. RGB and
// complex images are an error.
func (r *Reader) ReadFloat32Prefix(path string, dst []float32) (*Header, error) {
	return r.readWith(path, func(f *File) error { return f.ReadFloat32Prefix(dst) })
}

// ReadRawPrefix reads the first len(dst) bytes of the voxel data (whole
// voxels, file order, swapped to little-endian) into dst and stops, as
// ReadFloat32Prefix does; reading them all also verifies the gzip CRC. It
// lets a caller reuse one buffer, e.g. for uint8 label maps.
func (r *Reader) ReadRawPrefix(path string, dst []byte) (*Header, error) {
	return r.readWith(path, func(f *File) error { return f.ReadRawPrefix(dst) })
}

// readWith opens path, reads its voxels with read and closes it.
func (r *Reader) readWith(path string, read func(*File) error) (*Header, error) {
	f, err := r.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := read(f); err != nil {
		return nil, err
	}
	return f.Header(), nil
}

// File is a NIfTI image opened by Reader.Open: its header is read, its
// voxels are next in the stream. A caller can look at the header (shape,
// datatype) and then read as much of the voxels as it needs, without
// opening and inflating the file twice. The voxels can be read once, by
// one of the Read methods; Close it after.
type File struct {
	src  *source
	read bool
}

// Open opens a NIfTI file (or a .hdr/.img pair) and reads its header and
// extensions.
func (r *Reader) Open(path string) (*File, error) {
	src, err := r.open(path)
	if err != nil {
		return nil, err
	}
	return &File{src: src}, nil
}

// Header returns the file's header.
func (f *File) Header() *Header { return f.src.hdr }

// Close releases the file and its decoder.
func (f *File) Close() error {
	f.src.close()
	return nil
}

// begin claims the single read of the voxels.
func (f *File) begin() error {
	if f.read {
		return fmt.Errorf("nifti: %s: the voxels were read already (open the file again)", f.src.name)
	}
	f.read = true
	return nil
}

// ReadFloat32Into decodes all voxels into dst, as Reader.ReadFloat32Into.
func (f *File) ReadFloat32Into(dst []float32) error {
	if err := f.begin(); err != nil {
		return err
	}
	_, err := f.src.float32s(dst)
	return err
}

// ReadFloat32Prefix decodes the first len(dst) values, as
// Reader.ReadFloat32Prefix.
func (f *File) ReadFloat32Prefix(dst []float32) error {
	if err := f.begin(); err != nil {
		return err
	}
	src, h := f.src, f.src.hdr
	if !h.Datatype.Scalar() {
		return &FormatError{File: src.name, Field: "datatype", Offset: fDatatype.at(h.Version),
			Msg: fmt.Sprintf("a prefix of %v voxels cannot be read as float32", h.Datatype)}
	}
	if int64(len(dst)) > h.NumVoxels() {
		return fmt.Errorf("nifti: %s: prefix of %d values asked, the image has %d", src.name, len(dst), h.NumVoxels())
	}
	_, err := src.decode(dst, int64(len(dst)))
	return err
}

// ReadRawPrefix reads the first len(dst) voxel bytes, as
// Reader.ReadRawPrefix.
func (f *File) ReadRawPrefix(dst []byte) error {
	if err := f.begin(); err != nil {
		return err
	}
	src, h := f.src, f.src.hdr
	if int64(len(dst)) > h.DataSize() || len(dst)%h.Datatype.Size() != 0 {
		return fmt.Errorf("nifti: %s: a prefix of %d bytes asked, the image has %d bytes of %d-byte voxels", src.name, len(dst), h.DataSize(), h.Datatype.Size())
	}
	return src.rawInto(dst)
}

// ReadRaw is the package-level ReadRaw with this Reader's limits.
func (r *Reader) ReadRaw(path string) (*Header, []byte, error) {
	src, err := r.open(path)
	if err != nil {
		return nil, nil, err
	}
	defer src.close()
	raw, err := src.raw()
	if err != nil {
		return nil, nil, err
	}
	return src.hdr, raw, nil
}

// DecodeFloat32 decodes a whole single-file NIfTI image (.nii, or .nii.gz,
// recognised by the gzip magic) held in memory, as ReadFloat32 does. name is
// used in error messages.
func (r *Reader) DecodeFloat32(data []byte, name string) (*Header, []float32, error) {
	src, err := r.openStream(bytes.NewReader(data), int64(len(data)), name, nil)
	if err != nil {
		return nil, nil, err
	}
	defer src.close()
	out, err := src.float32s(nil)
	if err != nil {
		return nil, nil, err
	}
	return src.hdr, out, nil
}

// Paths returns the header and image file names of a NIfTI path: the same
// name for .nii and .nii.gz, and the .hdr/.img pair (with .gz where given)
// for either member of a pair.
func Paths(path string) (hdr, img string, err error) {
	lower := strings.ToLower(path)
	trim := func(suffix string) string { return path[:len(path)-len(suffix)] }
	switch {
	case strings.HasSuffix(lower, ".nii"), strings.HasSuffix(lower, ".nii.gz"):
		return path, path, nil
	case strings.HasSuffix(lower, ".hdr"):
		return path, pairPartner(trim(".hdr"), ".img"), nil
	case strings.HasSuffix(lower, ".hdr.gz"):
		return path, pairPartner(trim(".hdr.gz"), ".img"), nil
	case strings.HasSuffix(lower, ".img"):
		return pairPartner(trim(".img"), ".hdr"), path, nil
	case strings.HasSuffix(lower, ".img.gz"):
		return pairPartner(trim(".img.gz"), ".hdr"), path, nil
	}
	return "", "", fmt.Errorf("nifti: %s: unknown file extension (want .nii, .nii.gz, .hdr, .img, .hdr.gz or .img.gz)", path)
}

// pairPartner finds the other member of a pair: base+ext, else base+ext+".gz"
// (either may exist); when neither exists it returns base+ext so the error
// names the expected file.
func pairPartner(base, ext string) string {
	for _, cand := range []string{base + ext, base + ext + ".gz"} {
		if _, err := os.Stat(cand); err == nil {
			return cand
		}
	}
	return base + ext
}

// source is an open NIfTI stream positioned at the start of the voxel data.
type source struct {
	hdr     *Header
	name    string // the file the voxels are read from, for errors
	r       io.Reader
	pos     int64     // bytes consumed from the (decompressed) data stream
	gz      io.Reader // the decompressing stream, nil for an uncompressed file
	limit   int64     // the most bytes the (decompressed) stream can hold
	closers []io.Closer
}

// gzState is a gzip decoder, pooled: it holds half a MiB of input window,
// output window and tables, which a worker decoding a case per sample
// should not allocate per file. internal/inflate rather than
// klauspost/compress decodes: twice as fast on MRI data (docs/bench/inflate.md),
// where inflating was two thirds of the .nii.gz pipeline's CPU.
type gzState struct {
	zr inflate.Reader
}

var gzPool = sync.Pool{New: func() any { return new(gzState) }}

// Close returns the state to the pool; the source it served is closed.
func (g *gzState) Close() error {
	gzPool.Put(g)
	return nil
}

// newSource wraps a file's bytes (size of them on disk) in a buffered
// stream, decompressing when it starts with the gzip magic. Its limit is
// the file size, or for gzip the smaller of the cap and what deflate can
// expand the file to.
func (r *Reader) newSource(rd io.Reader, size int64, name string) (*source, error) {
	br := bufio.NewReaderSize(rd, 64<<10)
	src := &source{name: name, r: br, limit: size}
	if sniffGzip(br) {
		g := gzPool.Get().(*gzState)
		if err := g.zr.ResetReader(br); err != nil {
			g.Close()
			return nil, &FormatError{File: name, Field: "gzip", Offset: 0, Msg: err.Error()}
		}
		src.gz, src.r = &g.zr, &g.zr
		src.closers = append(src.closers, g)
		src.limit = min(r.gzipCap(), size*maxDeflateRatio+4096)
	}
	return src, nil
}

func (s *source) close() {
	for _, c := range s.closers {
		c.Close()
	}
	s.closers = nil
}

func (r *Reader) open(path string) (*source, error) {
	hdrPath, imgPath, err := Paths(path)
	if err != nil {
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
		return nil, fmt.Errorf("nifti: %s is a directory", hdrPath)
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

// skipTo discards stream bytes up to offset off.
func (s *source) skipTo(off int64) error {
	if off < s.pos {
		// Extensions ran past vox_offset; the header is inconsistent.
		return fieldErr(s.name, s.hdr.Version, fVoxOff, "%d lies inside the header extensions (which end at byte %d)", off, s.pos)
	}
	n, err := io.CopyN(io.Discard, s.r, off-s.pos)
	s.pos += n
	if err != nil {
		return s.readErr("vox_offset", err, off)
	}
	return nil
}

// readErr turns an I/O error while reading the named part into a
// FormatError that says where the stream ended or broke.
func (s *source) readErr(what string, err error, want int64) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &FormatError{File: s.name, Field: what, Offset: s.pos,
			Msg: fmt.Sprintf("truncated: stream ends at byte %d, needed through byte %d", s.pos, want)}
	}
	if s.gz != nil {
		return &FormatError{File: s.name, Field: "gzip", Offset: s.pos,
			Msg: fmt.Sprintf("corrupt compressed data while reading %s: %v", what, err)}
	}
	return fmt.Errorf("nifti: read %s: %s: %w", s.name, what, err)
}

// finish verifies the gzip trailer (CRC and length) when the voxel data ends
// the stream, reading at most a little trailing data to get there.
func (s *source) finish() error {
	if s.gz == nil {
		return nil
	}
	var tail [4096]byte
	for read := 0; read < 1<<20; {
		n, err := s.gz.Read(tail[:])
		read += n
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &FormatError{File: s.name, Field: "gzip", Offset: s.pos + int64(read), Msg: fmt.Sprintf("corrupt compressed data after the voxels: %v", err)}
		}
	}
	return nil // long trailing data: not worth inflating to check the CRC
}

// raw reads the voxel bytes, swapped to little-endian.
func (s *source) raw() ([]byte, error) {
	buf := make([]byte, s.hdr.DataSize())
	return buf, s.rawInto(buf)
}

// rawInto reads len(buf) voxel bytes, swapped to little-endian; when that
// is all of them it also verifies the gzip trailer.
func (s *source) rawInto(buf []byte) error {
	h := s.hdr
	n, err := io.ReadFull(s.r, buf)
	s.pos += int64(n)
	if err != nil {
		return s.readErr("data", err, s.pos-int64(n)+int64(len(buf)))
	}
	if int64(len(buf)) == h.DataSize() {
		if err := s.finish(); err != nil {
			return err
		}
	}
	if h.ByteOrder == binary.BigEndian {
		swapInPlace(buf, dtTable[h.Datatype].comp)
	}
	return nil
}

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
	if h.Datatype == Float32 && le && len(dst) > 0 {
		// Fast path: the stream's bytes are the destination's bytes.
		b := unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), len(dst)*4)
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
