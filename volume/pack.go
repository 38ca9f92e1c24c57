package volume

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Multi-label targets (sigmoid outputs whose classes may overlap) travel
// through the pipeline as ordinary uint8 label maps, so that sampling,
// nearest-neighbour augmentation, stores and caches need not know about
// them: bit c of a voxel's byte is set iff the voxel belongs to class
// (output channel) c, c = 0..MaxBitClasses−1, and the byte IgnoreByte
// marks a voxel the losses and metrics leave out. Two derived volumes
// produce such maps, each named by a path so that every reader of case
// files (Open, the chunk cache's handles, the verification) reads the
// packed bytes without knowing about them:
//
//   - a bit-packed label, "P0#bits=C0#bit=C1:P1#bit=C2:P2…": one binary
//     file per class (cellmap's crops: mito, mito_membrane, er, each its
//     own array), file Pi setting bit Ci wherever it is non-zero;
//   - a looked-up label, "P#lut=V:B,V:B,…": the label map P with value
//     V read as byte B (unlisted values as 0) — nnU-Net v2's regions, a
//     region being the union of its label values.
//
// Either may then be masked (MaskedPath, the ignore value IgnoreByte)
// and resampled (ResampledPath) as any label is.

// MaxBitClasses is the most classes a bit-packed label holds: bits 0..6,
// the byte 255 being the ignore value.
const MaxBitClasses = 7

// IgnoreByte is the ignore value of a bit-packed label map.
const IgnoreByte = 255

const (
	bitsTag = "#bits="
	bitTag  = "#bit="
	lutTag  = "#lut="
)

// PackedPath names the bit-packed label whose class c is the binary file
// files[c] (see Packed). It needs at least one file.
func PackedPath(files map[int]string) string {
	bits := make([]int, 0, len(files))
	for c := range files {
		bits = append(bits, c)
	}
	sort.Ints(bits)
	var b strings.Builder
	for i, c := range bits {
		if i == 0 {
			fmt.Fprintf(&b, "%s%s%d", files[c], bitsTag, c)
			continue
		}
		fmt.Fprintf(&b, "%s%d:%s", bitTag, c, files[c])
	}
	return b.String()
}

// SplitPacked splits a bit-packed label's path into its files by bit; ok
// is false for a path that names none. A malformed one is an error naming
// the path.
func SplitPacked(path string) (files map[int]string, ok bool, err error) {
	i := strings.Index(path, bitsTag)
	if i < 0 {
		return nil, false, nil
	}
	bad := func(what string) error {
		return fmt.Errorf("%s: %s (want P0#bits=C0#bit=C1:P1… with classes 0..%d, each once)", path, what, MaxBitClasses-1)
	}
	files = map[int]string{}
	parts := strings.Split(path[i+len(bitsTag):], bitTag)
	for k, p := range parts {
		num, file := p, path[:i]
		if k > 0 {
			var found bool
			if num, file, found = strings.Cut(p, ":"); !found {
				return nil, false, bad(fmt.Sprintf("%q is not C:PATH", p))
			}
		}
		c, err := strconv.Atoi(num)
		if err != nil || c < 0 || c >= MaxBitClasses {
			return nil, false, bad(fmt.Sprintf("class %q", num))
		}
		if _, dup := files[c]; dup || file == "" {
			return nil, false, bad(fmt.Sprintf("class %d twice or without a file", c))
		}
		files[c] = file
	}
	return files, true, nil
}

// Packed returns the bit-packed label of binary files by class: bit c of
// a voxel is set where files[c] is non-zero. Every file must be one
// channel of the same shape; an error names the file that differs.
// Closing the packed file closes them all.
func Packed(files map[int]File, names map[int]string) (File, error) {
	p := &packed{}
	var shape [3]int
	for c := 0; c < MaxBitClasses; c++ {
		f, ok := files[c]
		if !ok {
			continue
		}
		h := f.Header()
		if h.Channels != 1 {
			return nil, fmt.Errorf("class %d (%s): %d channels, want one binary array", c, names[c], h.Channels)
		}
		if len(p.files) == 0 {
			shape, p.hdr = h.Shape, h
		} else if h.Shape != shape {
			return nil, fmt.Errorf("class %d (%s): shape %v differs from class %d's (%s) %v", c, names[c], h.Shape, p.bits[0], names[p.bits[0]], shape)
		} else {
			// Compared in the first class's unit (one stated unit each:
			// the other's spacing is converted).
			hu, err := h.InUnit(p.hdr.Unit)
			if err != nil {
				return nil, fmt.Errorf("class %d (%s): %w", c, names[c], err)
			}
			for a := range 3 {
				if math.Abs(hu.Spacing[a]-p.hdr.Spacing[a]) > 1e-3*math.Abs(p.hdr.Spacing[a]) {
					return nil, fmt.Errorf("class %d (%s): spacing %v %s differs from class %d's (%s) %v %s", c, names[c], h.Spacing, UnitName(h.Unit), p.bits[0], names[p.bits[0]], p.hdr.Spacing, UnitName(p.hdr.Unit))
				}
			}
		}
		p.files = append(p.files, f)
		p.bits = append(p.bits, c)
	}
	if len(p.files) == 0 || len(p.files) != len(files) {
		return nil, fmt.Errorf("bit-packed label: want 1..%d files on bits 0..%d, have %d", MaxBitClasses, MaxBitClasses-1, len(files))
	}
	if ck, ok := p.files[0].(Chunked); ok {
		return &chunkedPacked{packed: p, chunk: ck.ChunkShape()}, nil
	}
	return p, nil
}

type packed struct {
	files []File
	bits  []int
	hdr   Header
}

func (p *packed) Header() Header { return p.hdr }

func (p *packed) ReadLabels(box Box, dst []uint8) error {
	clear(dst)
	buf := make([]float32, box.Voxels())
	for i, f := range p.files {
		if err := f.ReadRegion(box, [][]float32{buf}); err != nil {
			return fmt.Errorf("class %d: %w", p.bits[i], err)
		}
		bit := uint8(1) << p.bits[i]
		for j, v := range buf {
			if v != 0 {
				dst[j] |= bit
			}
		}
	}
	return nil
}

func (p *packed) ReadRegion(box Box, dst [][]float32) error {
	lbl := make([]uint8, box.Voxels())
	if err := p.ReadLabels(box, lbl); err != nil {
		return err
	}
	for _, ch := range dst {
		for i, v := range lbl {
			ch[i] = float32(v)
		}
	}
	return nil
}

func (p *packed) Close() error {
	var err error
	for _, f := range p.files {
		if e := f.Close(); err == nil {
			err = e
		}
	}
	return err
}

// chunkedPacked keeps the first file's chunk shape visible, as
// chunkedWindow does.
type chunkedPacked struct {
	*packed
	chunk [3]int
}

func (p *chunkedPacked) ChunkShape() [3]int { return p.chunk }

// LUTPath names the label map at path with its values read through lut
// (see LookedUp); only lut's non-zero entries are written.
func LUTPath(path string, lut [256]uint8) string {
	var parts []string
	for v, b := range lut {
		if b != 0 {
			parts = append(parts, fmt.Sprintf("%d:%d", v, b))
		}
	}
	return path + lutTag + strings.Join(parts, ",")
}

// SplitLUT splits a looked-up label's path into its file's path and the
// table; ok is false for a path that names none.
func SplitLUT(path string) (base string, lut [256]uint8, ok bool, err error) {
	i := strings.LastIndex(path, lutTag)
	if i < 0 {
		return path, lut, false, nil
	}
	base, spec := path[:i], path[i+len(lutTag):]
	if spec == "" {
		return base, lut, true, nil
	}
	for _, kv := range strings.Split(spec, ",") {
		a, b, found := strings.Cut(kv, ":")
		v, err1 := strconv.Atoi(a)
		w, err2 := strconv.Atoi(b)
		if !found || err1 != nil || err2 != nil || v < 0 || v > 255 || w < 0 || w > 255 {
			return "", lut, false, fmt.Errorf("%s: lut entry %q: want V:B with V and B in 0..255", path, kv)
		}
		lut[v] = uint8(w)
	}
	return base, lut, true, nil
}

// LookedUp returns the label map f with every value v read as lut[v]
// (by ReadLabels and, as a float, by ReadRegion). Closing it closes f.
func LookedUp(f File, lut [256]uint8) (File, error) {
	if h := f.Header(); h.Channels != 1 {
		return nil, fmt.Errorf("%d channels, want one label map", h.Channels)
	}
	l := &lookedUp{f: f, lut: lut}
	if ck, ok := f.(Chunked); ok {
		return &chunkedLookedUp{lookedUp: l, chunk: ck.ChunkShape()}, nil
	}
	return l, nil
}

type lookedUp struct {
	f   File
	lut [256]uint8
}

func (l *lookedUp) Header() Header { return l.f.Header() }

func (l *lookedUp) ReadLabels(box Box, dst []uint8) error {
	if err := l.f.ReadLabels(box, dst); err != nil {
		return err
	}
	for i, v := range dst {
		dst[i] = l.lut[v]
	}
	return nil
}

func (l *lookedUp) ReadRegion(box Box, dst [][]float32) error {
	lbl := make([]uint8, box.Voxels())
	if err := l.ReadLabels(box, lbl); err != nil {
		return err
	}
	for _, ch := range dst {
		for i, v := range lbl {
			ch[i] = float32(v)
		}
	}
	return nil
}

func (l *lookedUp) Close() error { return l.f.Close() }

type chunkedLookedUp struct {
	*lookedUp
	chunk [3]int
}

func (l *chunkedLookedUp) ChunkShape() [3]int { return l.chunk }
