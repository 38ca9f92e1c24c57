package volume

import (
	"fmt"
	"strconv"
	"strings"
)

// A window is a box of a larger volume seen as a volume of its own: a
// label crop's region of the raw volume it was annotated in (a dataset
// manifest, package data). Its voxel (0, 0, 0) is the box's Lo, and its
// affine is the file's shifted there, so world coordinates agree with
// the whole file's. A window is named by a path, "FILE#window=z0:z1,y0:y1,x0:x1"
// (half-open, in the file's voxels, (D, H, W) order), so that everything
// that opens case files by path (Open, the chunk cache's handles, the
// verification) opens it without knowing about windows.

// windowTag separates a file's path from its window's box.
const windowTag = "#window="

// WindowPath names box of the file at path (see Window).
func WindowPath(path string, box Box) string {
	return fmt.Sprintf("%s%s%d:%d,%d:%d,%d:%d", path, windowTag,
		box.Lo[0], box.Hi[0], box.Lo[1], box.Hi[1], box.Lo[2], box.Hi[2])
}

// SplitWindow splits a window's path into its file's path and box; ok is
// false (and base the path itself) for a path that names no window. A
// malformed box is an error naming the path.
func SplitWindow(path string) (base string, box Box, ok bool, err error) {
	i := strings.LastIndex(path, windowTag)
	if i < 0 {
		return path, Box{}, false, nil
	}
	base, spec := path[:i], path[i+len(windowTag):]
	axes := strings.Split(spec, ",")
	if len(axes) != 3 {
		return "", Box{}, false, fmt.Errorf("%s: window %q: want z0:z1,y0:y1,x0:x1", path, spec)
	}
	for a, s := range axes {
		lo, hi, found := strings.Cut(s, ":")
		l, err1 := strconv.Atoi(lo)
		h, err2 := strconv.Atoi(hi)
		if !found || err1 != nil || err2 != nil || l < 0 || h <= l {
			return "", Box{}, false, fmt.Errorf("%s: window axis %d %q: want lo:hi with 0 ≤ lo < hi", path, a, s)
		}
		box.Lo[a], box.Hi[a] = l, h
	}
	return base, box, true, nil
}

// FilePath is the path of the file on disk that path reads: the file of a
// window, the label's file of a masked label (MaskedPath; its mask is a
// second file, which SplitMask names), the file of a resampled one
// (ResampledPath), the first class's file of a bit-packed label
// (PackedPath), the label map of a looked-up one (LUTPath), else path
// itself.
func FilePath(path string) string {
	if i := strings.LastIndex(path, resampleTag); i >= 0 {
		path = path[:i]
	}
	if i := strings.Index(path, maskTag); i >= 0 {
		path = path[:i]
	}
	if i := strings.LastIndex(path, lutTag); i >= 0 {
		path = path[:i]
	}
	if i := strings.Index(path, bitsTag); i >= 0 {
		path = path[:i]
	}
	if i := strings.LastIndex(path, windowTag); i >= 0 {
		return path[:i]
	}
	return path
}

// Window returns box of f as a volume of box's shape. The box must lie
// inside f. Closing the window closes f.
func Window(f File, box Box) (File, error) {
	h := f.Header()
	if box.Empty() || !Whole(h.Shape).Contains(box) {
		return nil, fmt.Errorf("window %v..%v is not inside the volume's %v", box.Lo, box.Hi, h.Shape)
	}
	w := &window{f: f, box: box, hdr: h}
	w.hdr.Shape = box.Size()
	// Voxel (0, 0, 0) of the window is voxel Lo of f: the affine's
	// translation moves to where Lo lies, (x, y, z) = (W, H, D).
	lo := [3]float64{float64(box.Lo[2]), float64(box.Lo[1]), float64(box.Lo[0])}
	for r := range 3 {
		t := h.Affine[r][3]
		for c := range 3 {
			t += h.Affine[r][c] * lo[c]
		}
		w.hdr.Affine[r][3] = t
	}
	if ck, ok := f.(Chunked); ok {
		return &chunkedWindow{window: w, chunk: ck.ChunkShape()}, nil
	}
	return w, nil
}

type window struct {
	f   File
	box Box
	hdr Header
}

func (w *window) Header() Header { return w.hdr }

// shift moves a box of the window into f's voxels, refusing one that
// leaves the window (f would read voxels outside the crop silently).
func (w *window) shift(b Box) (Box, error) {
	if !Whole(w.hdr.Shape).Contains(b) {
		return Box{}, fmt.Errorf("region %v..%v outside the window's %v", b.Lo, b.Hi, w.hdr.Shape)
	}
	for a := range 3 {
		b.Lo[a] += w.box.Lo[a]
		b.Hi[a] += w.box.Lo[a]
	}
	return b, nil
}

func (w *window) ReadRegion(b Box, dst [][]float32) error {
	s, err := w.shift(b)
	if err != nil {
		return err
	}
	return w.f.ReadRegion(s, dst)
}

func (w *window) ReadLabels(b Box, dst []uint8) error {
	s, err := w.shift(b)
	if err != nil {
		return err
	}
	return w.f.ReadLabels(s, dst)
}

func (w *window) Close() error { return w.f.Close() }

// chunkedWindow keeps a chunked file's chunk shape visible through the
// window, so readers that step chunk by chunk still read in chunk-sized
// boxes (not aligned to the file's chunks unless the window is).
type chunkedWindow struct {
	*window
	chunk [3]int
}

func (w *chunkedWindow) ChunkShape() [3]int { return w.chunk }
