package tiff

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/voxtrain/voxtrain/volume"
)

// A folder of 2-D TIFF slices (a Vesuvius surface volume's 00.tif …
// 64.tif, a microscope's z series) is one volume: slice i of the folder,
// in natural order, is plane i along D.

// matchScan is how many entries Match looks at in a folder: enough to
// see a TIFF slice in a folder of them, few enough that asking about a
// Zarr array with a million chunk files costs one small read.
const matchScan = 64

// isSliceName reports whether a folder entry's name is a TIFF slice.
func isSliceName(name string) bool { return !hidden(name) && Match(name) }

// hidden reports a dot file (.DS_Store, macOS's ._00.tif), which a
// folder of slices may hold and which is never a slice.
func hidden(name string) bool { return strings.HasPrefix(name, ".") }

// matchFolder reports whether dir is a folder with a TIFF file among its
// first entries (in the order the file system lists them).
func matchFolder(dir string) bool {
	d, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer d.Close()
	ents, _ := d.ReadDir(matchScan)
	for _, e := range ents {
		if !e.IsDir() && isSliceName(e.Name()) {
			return true
		}
	}
	return false
}

// slice is one file of a folder: its layout, read on open; its file is
// opened again for each read.
type slice struct {
	path string
	t    *File
}

// Folder is a folder of 2-D TIFF slices opened as one volume.
type Folder struct {
	dir    string
	hdr    volume.Header
	slices []slice
}

// OpenFolder opens a folder whose files are 2-D TIFF images as one
// volume: the files in natural order (slice2 before slice10: runs of
// digits compare as numbers) are its planes. Every slice's IFDs are read
// and checked against the first slice's shape, channels, sample type,
// spacing and unit; voxels are read when a region needs them, from the
// slices it spans only. Spacing along H and W is the first slice's
// (ImageJ resolution, OME PhysicalSize); along D it is the first slice's
// ImageJ spacing= or OME PhysicalSizeZ, else 1. Dot files are skipped;
// any other file or folder is an error naming it.
func OpenFolder(dir string) (volume.File, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("tiff: %w", err)
	}
	var names []string
	for _, e := range ents {
		switch {
		case hidden(e.Name()):
		case e.IsDir() || !isSliceName(e.Name()):
			return nil, fmt.Errorf("tiff: %s: not a TIFF slice (a folder of slices holds only .tif or .tiff files)", filepath.Join(dir, e.Name()))
		default:
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("tiff: %s: a folder with no TIFF slice", dir)
	}
	slices.SortFunc(names, naturalCompare)
	fo := &Folder{dir: dir, slices: make([]slice, len(names))}
	for i, n := range names {
		p := filepath.Join(dir, n)
		t, err := openSlice(p)
		if err != nil {
			return nil, err
		}
		fo.slices[i] = slice{path: p, t: t}
		if i == 0 {
			continue
		}
		f := fo.slices[0].t
		switch {
		case t.hdr.Shape[1] != f.hdr.Shape[1] || t.hdr.Shape[2] != f.hdr.Shape[2] || t.hdr.Channels != f.hdr.Channels:
			return nil, fmt.Errorf("tiff: %s: %d×%d pixels of %d channels, but %s has %d×%d of %d",
				p, t.hdr.Shape[1], t.hdr.Shape[2], t.hdr.Channels, fo.slices[0].path, f.hdr.Shape[1], f.hdr.Shape[2], f.hdr.Channels)
		case t.typ != f.typ:
			return nil, fmt.Errorf("tiff: %s: samples of type %v, but %s has %v", p, t.typ, fo.slices[0].path, f.typ)
		case t.hdr.Spacing != f.hdr.Spacing:
			return nil, fmt.Errorf("tiff: %s: spacing (D, H, W) %v, but %s has %v", p, t.hdr.Spacing, fo.slices[0].path, f.hdr.Spacing)
		case t.hdr.Unit != f.hdr.Unit:
			return nil, fmt.Errorf("tiff: %s: spacing in %s, but %s's is in %s", p, volume.UnitName(t.hdr.Unit), fo.slices[0].path, volume.UnitName(f.hdr.Unit))
		}
	}
	first := fo.slices[0].t
	fo.hdr = first.hdr
	fo.hdr.Shape[0] = len(names)
	// Read slice by slice: only the addressing of the stack is bounded.
	if err := volume.CheckShape(fo.hdr.Shape); err != nil {
		return nil, fmt.Errorf("tiff: %s: %w", dir, err)
	}
	return fo, nil
}

// openSlice reads one slice's IFDs and closes its file: a folder of
// thousands of slices holds no file open between reads.
func openSlice(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tiff: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("tiff: %w", err)
	}
	t, err := open(f, st.Size(), path)
	if err != nil {
		return nil, err
	}
	t.r.r = nil
	if t.hdr.Shape[0] != 1 {
		return nil, t.r.errf("%d planes, want one 2-D image per file in a folder of slices", t.hdr.Shape[0])
	}
	return t, nil
}

// Header implements volume.File.
func (fo *Folder) Header() volume.Header { return fo.hdr }

// Close implements volume.File (no file is held open).
func (fo *Folder) Close() error { return nil }

// ReadRegion implements volume.File: it opens only the slices the box
// spans and reads the strips or tiles of each that overlap it.
func (fo *Folder) ReadRegion(box volume.Box, dst [][]float32) error {
	if len(dst) != fo.hdr.Channels {
		return fmt.Errorf("tiff: %s: %d destinations for %d channels", fo.dir, len(dst), fo.hdr.Channels)
	}
	if box.Empty() || !volume.Whole(fo.hdr.Shape).Contains(box) {
		return fmt.Errorf("tiff: %s: region %v outside the volume %v", fo.dir, box, fo.hdr.Shape)
	}
	if err := volume.CheckInMemory(box.Size(), fo.hdr.Channels); err != nil {
		return fmt.Errorf("tiff: %s: region %v..%v: %w", fo.dir, box.Lo, box.Hi, err)
	}
	for _, d := range dst {
		if len(d) != box.Voxels() {
			return fmt.Errorf("tiff: %s: a destination of %d values for a region of %d", fo.dir, len(d), box.Voxels())
		}
	}
	sz := box.Size()
	plane := sz[1] * sz[2]
	sub := volume.Box{Lo: [3]int{0, box.Lo[1], box.Lo[2]}, Hi: [3]int{1, box.Hi[1], box.Hi[2]}}
	part := make([][]float32, len(dst))
	for z := box.Lo[0]; z < box.Hi[0]; z++ {
		for c := range dst {
			o := (z - box.Lo[0]) * plane
			part[c] = dst[c][o : o+plane]
		}
		if err := fo.readSlice(z, sub, part); err != nil {
			return err
		}
	}
	return nil
}

// readSlice reads box (one plane) of slice z into dst, on its own copy
// of the slice's reader: reads of a Folder may run concurrently.
func (fo *Folder) readSlice(z int, box volume.Box, dst [][]float32) error {
	s := fo.slices[z]
	f, err := os.Open(s.path)
	if err != nil {
		return fmt.Errorf("tiff: %w", err)
	}
	defer f.Close()
	t := *s.t
	t.r.r = f
	// The file may have changed since it was opened: a strip that now
	// lies past its end is a read error naming it, not a short read.
	if st, err := f.Stat(); err == nil {
		t.r.size = st.Size()
	}
	return t.ReadRegion(box, dst)
}

// ReadLabels implements volume.File: every voxel of the box must be an
// integer in 0..255.
func (fo *Folder) ReadLabels(box volume.Box, dst []uint8) error {
	if fo.hdr.Channels != 1 {
		return fmt.Errorf("tiff: %s: a label map with %d channels, want one", fo.dir, fo.hdr.Channels)
	}
	if len(dst) != box.Voxels() {
		return fmt.Errorf("tiff: %s: a destination of %d labels for a region of %d", fo.dir, len(dst), box.Voxels())
	}
	if err := volume.CheckInMemory(box.Size(), 1); err != nil {
		return fmt.Errorf("tiff: %s: region %v..%v: %w", fo.dir, box.Lo, box.Hi, err)
	}
	f := make([]float32, len(dst))
	if err := fo.ReadRegion(box, [][]float32{f}); err != nil {
		return err
	}
	return volume.ToLabels(dst, f, fo.dir)
}

// naturalCompare orders names as people number files: runs of digits
// compare by their value (slice2 < slice10, 09 < 10), the rest byte by
// byte; names equal that way (07 and 7) fall back to plain order.
func naturalCompare(a, b string) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if isDigit(a[i]) && isDigit(b[j]) {
			ei, ej := digitsEnd(a, i), digitsEnd(b, j)
			na, nb := strings.TrimLeft(a[i:ei], "0"), strings.TrimLeft(b[j:ej], "0")
			// Compared as text of equal length: no overflow for long runs.
			if len(na) != len(nb) {
				return cmpInt(len(na), len(nb))
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			i, j = ei, ej
			continue
		}
		if a[i] != b[j] {
			return cmpInt(int(a[i]), int(b[j]))
		}
		i++
		j++
	}
	if c := cmpInt(len(a)-i, len(b)-j); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func digitsEnd(s string, i int) int {
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
