package nifti

import (
	"fmt"
	"sync"

	"github.com/voxtrain/voxtrain/volume"
)

// NIfTI is the volume format of .nii, .nii.gz and .hdr/.img files, which
// package volume opens once this package is linked in.
func init() {
	volume.Register(volume.Format{Name: "nifti", Match: func(p string) bool { _, _, ok := splitExt(p); return ok },
		Open: OpenVolume, WriteLabels: WriteLabels, Endings: labelEndings, Files: writtenFiles, Reads: pairFile})
}

// volumeFile is a NIfTI file as a volume.File: a 3D image, or a 4D one
// whose 4th axis holds the channels.
type volumeFile struct {
	f   *File
	hdr volume.Header
}

// OpenVolume opens a NIfTI file for the data pipeline (see volume.File):
// (x, y, z[, t]) becomes (D, H, W) = (z, y, x) with t channels, the
// voxel size and affine come from the header, their unit from
// xyzt_units (Header.SpatialUnit).
func OpenVolume(path string) (volume.File, error) {
	var r Reader
	f, err := r.Open(path)
	if err != nil {
		return nil, err
	}
	h := f.Header()
	shape, channels, err := spatialShape(h.Shape())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	v := &volumeFile{f: f, hdr: volume.Header{Shape: shape, Channels: channels,
		Spacing: [3]float64{float64(h.Pixdim[3]), float64(h.Pixdim[2]), float64(h.Pixdim[1])},
		Unit:    h.SpatialUnit()}}
	if a, err := h.Affine(); err == nil {
		v.hdr.Affine = volume.Affine(a)
	}
	return v, nil
}

// spatialShape turns a nibabel shape (x, y, z[, t]) into (D, H, W) and the
// number of volumes along t.
func spatialShape(sh []int) ([3]int, int, error) {
	switch {
	case len(sh) == 3:
		return [3]int{sh[2], sh[1], sh[0]}, 1, nil
	case len(sh) == 4:
		return [3]int{sh[2], sh[1], sh[0]}, sh[3], nil
	case len(sh) == 2:
		return [3]int{1, sh[1], sh[0]}, 1, nil
	case len(sh) > 4:
		for _, n := range sh[4:] {
			if n != 1 {
				return [3]int{}, 0, fmt.Errorf("shape %v: more than 4 dimensions", sh)
			}
		}
		return [3]int{sh[2], sh[1], sh[0]}, sh[3], nil
	}
	return [3]int{}, 0, fmt.Errorf("shape %v is not a 3D or 4D volume", sh)
}

func (v *volumeFile) Header() volume.Header { return v.hdr }

func (v *volumeFile) Close() error { return v.f.Close() }

func (v *volumeFile) name() string { return v.f.src.name }

// check validates a region read's box and destination lengths.
func (v *volumeFile) check(box volume.Box, dsts int, lens func(i int) int) error {
	if box.Empty() || !volume.Whole(v.hdr.Shape).Contains(box) {
		return fmt.Errorf("nifti: %s: region %v outside the volume %v", v.name(), box, v.hdr.Shape)
	}
	for i := 0; i < dsts; i++ {
		if lens(i) != box.Voxels() {
			return fmt.Errorf("nifti: %s: a destination of %d values for a region of %d", v.name(), lens(i), box.Voxels())
		}
	}
	return nil
}

// prefix is how many values (file order) hold every voxel of box in every
// channel: a stream is read no further.
func (v *volumeFile) prefix(box volume.Box) int {
	s := v.hdr.Shape
	plane := s[1] * s[2]
	return (v.hdr.Channels-1)*s[0]*plane + box.Hi[0]*plane
}

// planesFromZero reports whether box is whole planes from the first, the
// layout of a prefix of a one-channel file.
func (v *volumeFile) planesFromZero(box volume.Box) bool {
	s := v.hdr.Shape
	return v.hdr.Channels == 1 && box.Lo == [3]int{} && box.Hi[1] == s[1] && box.Hi[2] == s[2]
}

// ReadRegion implements volume.File. A whole read verifies the gzip
// checksum; a read that stops early cannot.
func (v *volumeFile) ReadRegion(box volume.Box, dst [][]float32) error {
	if len(dst) != v.hdr.Channels {
		return fmt.Errorf("nifti: %s: %d destinations for %d channels", v.name(), len(dst), v.hdr.Channels)
	}
	if err := v.check(box, len(dst), func(i int) int { return len(dst[i]) }); err != nil {
		return err
	}
	whole := box == volume.Whole(v.hdr.Shape)
	scalar := v.f.Header().Datatype.Scalar()
	if v.planesFromZero(box) {
		// The common case: straight into the destination.
		if whole {
			return v.f.ReadFloat32Into(dst[0])
		}
		if scalar {
			return v.f.ReadFloat32Prefix(dst[0])
		}
	}
	all := int(v.f.Header().NumVoxels())
	n := all
	if !whole && scalar {
		n = v.prefix(box)
	}
	buf := floatScratch.get(n)
	defer floatScratch.put(buf)
	var err error
	if n == all {
		err = v.f.ReadFloat32Into(*buf)
	} else {
		err = v.f.ReadFloat32Prefix(*buf)
	}
	if err != nil {
		return err
	}
	vox := v.hdr.Shape[0] * v.hdr.Shape[1] * v.hdr.Shape[2]
	for c := range dst {
		// Channel c starts at c·vox; the last one read may end at the box.
		copyBox(dst[c], (*buf)[c*vox:min((c+1)*vox, n)], v.hdr.Shape, box)
	}
	return nil
}

// ReadLabels implements volume.File. uint8 voxels without scaling are the
// class indices themselves and are read as bytes, no further than box's
// last plane; any other datatype is read whole, and every voxel must be an
// integer in 0..255.
func (v *volumeFile) ReadLabels(box volume.Box, dst []uint8) error {
	if v.hdr.Channels != 1 {
		return fmt.Errorf("nifti: %s: a label map with %d volumes, want one", v.name(), v.hdr.Channels)
	}
	if err := v.check(box, 1, func(int) int { return len(dst) }); err != nil {
		return err
	}
	h := v.f.Header()
	s := v.hdr.Shape
	vox := s[0] * s[1] * s[2]
	if slope, inter, err := h.Scaling(); err == nil && h.Datatype == Uint8 && slope == 1 && inter == 0 {
		if v.planesFromZero(box) {
			return v.f.ReadRawPrefix(dst)
		}
		buf := byteScratch.get(v.prefix(box))
		defer byteScratch.put(buf)
		if err := v.f.ReadRawPrefix(*buf); err != nil {
			return err
		}
		copyBox(dst, *buf, s, box)
		return nil
	}
	buf := floatScratch.get(vox)
	defer floatScratch.put(buf)
	if err := v.f.ReadFloat32Into(*buf); err != nil {
		return err
	}
	lbl := byteScratch.get(vox)
	defer byteScratch.put(lbl)
	if err := volume.ToLabels(*lbl, *buf, v.name()); err != nil {
		return err
	}
	copyBox(dst, *lbl, s, box)
	return nil
}

// copyBox copies box of a volume of shape (src, W fastest, at least up to
// box's last plane) into dst (box-sized).
func copyBox[T any](dst, src []T, shape [3]int, box volume.Box) {
	sz := box.Size()
	if box.Lo[1] == 0 && box.Hi[1] == shape[1] && box.Lo[2] == 0 && box.Hi[2] == shape[2] {
		plane := shape[1] * shape[2]
		copy(dst, src[box.Lo[0]*plane:box.Hi[0]*plane])
		return
	}
	o := 0
	for z := box.Lo[0]; z < box.Hi[0]; z++ {
		for y := box.Lo[1]; y < box.Hi[1]; y++ {
			i := (z*shape[1]+y)*shape[2] + box.Lo[2]
			copy(dst[o:o+sz[2]], src[i:i+sz[2]])
			o += sz[2]
		}
	}
}

// scratch is a pool of buffers for the reads that cannot go straight into
// the destination, reused across files.
type scratch[T any] struct{ pool sync.Pool }

var (
	floatScratch scratch[float32]
	byteScratch  scratch[uint8]
)

// get returns a buffer of n elements.
func (s *scratch[T]) get(n int) *[]T {
	p, _ := s.pool.Get().(*[]T)
	if p == nil || cap(*p) < n {
		b := make([]T, n)
		return &b
	}
	*p = (*p)[:n]
	return p
}

// put gives a buffer back.
func (s *scratch[T]) put(p *[]T) { s.pool.Put(p) }
