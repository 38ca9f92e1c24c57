package nifti

import "bytes"

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
	return allFloat32(r.open(path))
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
	return allFloat32(r.openStream(bytes.NewReader(data), int64(len(data)), name, nil))
}

// allFloat32 decodes every voxel of a source just opened (what r.open or
// r.openStream returned, passed straight in) and closes it.
func allFloat32(src *source, err error) (*Header, []float32, error) {
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
