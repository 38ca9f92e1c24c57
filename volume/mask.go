package volume

import (
	"fmt"
	"strconv"
	"strings"
)

// A masked label map reads as its label file, except that every voxel
// where a mask file is 0 reads as an ignore value (loss.ignore_label),
// which the losses and metrics leave out: the crops of a dataset manifest
// whose annotation covers only part of the crop (package data). It is
// named by a path, "LABEL#mask=MASK&ignore=N", so that everything that
// opens case files by path (Open, the chunk cache's handles, the
// verification) reads the masked labels without knowing about masks.
// LABEL and MASK are any paths Open reads (a window's too); the mask's
// part ends at the last "&ignore=", so a URL's query in it is kept.

// maskTag separates a label's path from its mask's; ignoreTag the mask's
// path from the ignore value.
const (
	maskTag   = "#mask="
	ignoreTag = "&ignore="
)

// MaskedPath names the label map at label with the voxels where the
// volume at mask is 0 read as value (see Masked).
func MaskedPath(label, mask string, value uint8) string {
	return label + maskTag + mask + ignoreTag + strconv.Itoa(int(value))
}

// SplitMask splits a masked label's path into its label's and mask's
// paths and the ignore value; ok is false (and label the path itself) for
// a path that names no mask. A malformed one is an error naming the path.
func SplitMask(path string) (label, mask string, value uint8, ok bool, err error) {
	i := strings.Index(path, maskTag)
	if i < 0 {
		return path, "", 0, false, nil
	}
	label, rest := path[:i], path[i+len(maskTag):]
	j := strings.LastIndex(rest, ignoreTag)
	if j < 0 {
		return "", "", 0, false, fmt.Errorf("%s: mask without %q", path, ignoreTag+"N")
	}
	mask, num := rest[:j], rest[j+len(ignoreTag):]
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 || n > 255 || label == "" || mask == "" {
		return "", "", 0, false, fmt.Errorf("%s: want LABEL#mask=MASK&ignore=N with N in 0..255", path)
	}
	return label, mask, uint8(n), true, nil
}

// Masked returns label with every voxel where mask is 0 read as value,
// by ReadLabels and (as a float) by ReadRegion. The mask must be one
// channel of the label's shape; any non-zero value keeps the label.
// Closing the masked file closes both.
func Masked(label, mask File, value uint8) (File, error) {
	lh, mh := label.Header(), mask.Header()
	if mh.Channels != 1 {
		return nil, fmt.Errorf("the mask has %d channels, want one", mh.Channels)
	}
	if mh.Shape != lh.Shape {
		return nil, fmt.Errorf("the mask's shape %v differs from the label's %v", mh.Shape, lh.Shape)
	}
	m := &masked{label: label, mask: mask, value: value}
	if ck, ok := label.(Chunked); ok {
		return &chunkedMasked{masked: m, chunk: ck.ChunkShape()}, nil
	}
	return m, nil
}

type masked struct {
	label, mask File
	value       uint8
}

func (m *masked) Header() Header { return m.label.Header() }

// keep reads box of the mask: true where the label is kept.
func (m *masked) keep(box Box) ([]bool, error) {
	buf := make([]float32, box.Voxels())
	if err := m.mask.ReadRegion(box, [][]float32{buf}); err != nil {
		return nil, fmt.Errorf("mask: %w", err)
	}
	keep := make([]bool, len(buf))
	for i, v := range buf {
		keep[i] = v != 0
	}
	return keep, nil
}

func (m *masked) ReadLabels(box Box, dst []uint8) error {
	if err := m.label.ReadLabels(box, dst); err != nil {
		return err
	}
	keep, err := m.keep(box)
	if err != nil {
		return err
	}
	for i, k := range keep {
		if !k {
			dst[i] = m.value
		}
	}
	return nil
}

func (m *masked) ReadRegion(box Box, dst [][]float32) error {
	if err := m.label.ReadRegion(box, dst); err != nil {
		return err
	}
	keep, err := m.keep(box)
	if err != nil {
		return err
	}
	for _, ch := range dst {
		for i, k := range keep {
			if !k {
				ch[i] = float32(m.value)
			}
		}
	}
	return nil
}

func (m *masked) Close() error {
	err := m.label.Close()
	if e := m.mask.Close(); err == nil {
		err = e
	}
	return err
}

// chunkedMasked keeps a chunked label's chunk shape visible, as
// chunkedWindow does.
type chunkedMasked struct {
	*masked
	chunk [3]int
}

func (m *chunkedMasked) ChunkShape() [3]int { return m.chunk }
