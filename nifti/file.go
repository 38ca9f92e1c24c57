package nifti

import "fmt"

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
