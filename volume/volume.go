// Package volume is what the data pipeline needs of an image file, in any
// format: its geometry from the header, before any voxel is read, and the
// voxels of a region when a sample needs them. A format implements File
// and registers itself (Register, as image formats do with
// image.RegisterFormat); the pipeline opens files with Open and never
// names a format. Package nifti is the first format.
//
// Arrays are (D, H, W) with W fastest, as everywhere in voxtrain: for a
// NIfTI file, D, H, W are its z, y, x.
//
// Size: two bounds, for two different things. CheckShape is addressing:
// a volume may have up to MaxVoxels (2^53) voxels, and formats that read
// by region (Zarr, N5, TIFF, raw NRRD and MetaImage) open such a volume
// and read boxes of it. CheckInMemory is memory: whoever decodes a whole
// volume, or a box of one, into a slice refuses more than MaxInMemory
// (2^31−1) values, with an error (ErrTooLarge) that names the file and
// says how such a volume is read instead.
package volume

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
)

// Box is a half-open box of voxels [Lo, Hi) in (D, H, W) order.
type Box struct {
	Lo, Hi [3]int
}

// Whole is the box of a volume of the given shape.
func Whole(shape [3]int) Box { return Box{Hi: shape} }

// Size returns the box's extent per axis (0 for an empty axis).
func (b Box) Size() [3]int {
	var s [3]int
	for i := range s {
		s[i] = max(0, b.Hi[i]-b.Lo[i])
	}
	return s
}

// Voxels returns the number of voxels in the box.
func (b Box) Voxels() int {
	s := b.Size()
	return s[0] * s[1] * s[2]
}

// Empty reports whether the box holds no voxel.
func (b Box) Empty() bool {
	return b.Hi[0] <= b.Lo[0] || b.Hi[1] <= b.Lo[1] || b.Hi[2] <= b.Lo[2]
}

// Contains reports whether o lies inside b (an empty o always does).
func (b Box) Contains(o Box) bool {
	if o.Empty() {
		return true
	}
	for i := range 3 {
		if o.Lo[i] < b.Lo[i] || o.Hi[i] > b.Hi[i] {
			return false
		}
	}
	return true
}

// MaxVoxels bounds the voxels of a volume (and its voxels times
// channels): 2^53. Every count and flat offset of such a volume — a
// voxel's index, a chunk's origin, a byte offset of 8-byte samples — is
// exact in an int (64-bit) with room to spare, and exact as a float64 too
// (JSON numbers, statistics' counts), which a larger count would not be.
// It is far above any real volume (an OpenOrganelle s0 is about 10^11
// voxels, 2^37), so it protects arithmetic, not memory: volumes are read
// by region, and MaxInMemory bounds what is decoded at once.
const MaxVoxels = 1 << 53

// MaxInMemory bounds the values (voxels × channels) decoded into memory
// at once, for a whole volume or a box of one: 2^31−1, 8 GiB of float32.
// Past it a read is refused rather than tried: the data pipeline's
// whole-case reads keep several copies (decoded, normalised, resampled),
// and the in-memory structures built over a whole case index it with
// int32 (the foreground index's locations, augmentation's region
// indices). A volume larger than this is read by region: a dataset
// manifest reads the crops of it, and train predict -o OUT.zarr predicts
// it block by block.
const MaxInMemory = math.MaxInt32

// ErrTooLarge is wrapped by the errors of CheckInMemory: a read that would
// decode more than MaxInMemory values at once.
var ErrTooLarge = errors.New("too large to decode into memory at once")

// CheckShape reports a shape that is not a volume an index can address:
// an axis ≤ 0, or more than MaxVoxels voxels. It bounds no memory:
// formats that read by region (Zarr, N5, TIFF, raw NRRD and MetaImage)
// open volumes of any addressable size, and whoever decodes a whole
// volume or a box of one checks that with CheckInMemory.
func CheckShape(shape [3]int) error {
	for i, n := range shape {
		if n <= 0 {
			return fmt.Errorf("volume shape %v: axis %d is %d, want > 0", shape, i, n)
		}
	}
	// Multiplied in float64: axes of 2^32 would wrap an int64 product.
	if float64(shape[0])*float64(shape[1])*float64(shape[2]) > MaxVoxels {
		return fmt.Errorf("volume shape %v has more than 2^53 voxels", shape)
	}
	return nil
}

// CheckValues is CheckShape for a volume of channels values per voxel:
// at least one channel, and at most MaxVoxels values in all (multiplied
// in float64: the product may not fit an int64).
func CheckValues(shape [3]int, channels int) error {
	if err := CheckShape(shape); err != nil {
		return err
	}
	if channels < 1 || float64(channels)*float64(shape[0])*float64(shape[1])*float64(shape[2]) > MaxVoxels {
		return fmt.Errorf("%d channels of %v voxels: want at least one channel and at most 2^53 values", channels, shape)
	}
	return nil
}

// CheckInMemory reports a read of a box of size shape, channels values
// per voxel, that would decode more than MaxInMemory values into memory
// at once (an error wrapping ErrTooLarge that says how to read such a
// volume; the caller adds the file's name). Call it where a whole volume,
// or a whole requested box, is decoded into one slice.
func CheckInMemory(shape [3]int, channels int) error {
	n := float64(shape[0]) * float64(shape[1]) * float64(shape[2]) * float64(max(channels, 1))
	if n <= MaxInMemory {
		return nil
	}
	what := fmt.Sprintf("%d×%d×%d voxels", shape[0], shape[1], shape[2])
	if channels > 1 {
		what += fmt.Sprintf(" × %d channels", channels)
	}
	return fmt.Errorf("%s (%.3g values) are %w: more than 2^31−1 values; read such a volume by region instead: as a dataset manifest's raw with label crops placed in it, or predicted block by block with train predict -o OUT.zarr", what, n, ErrTooLarge)
}

// Affine maps voxel indices (x, y, z, 1) = (W, H, D, 1) to world
// coordinates (RAS+, as NIfTI and nibabel), in the unit of the Header it
// belongs to (NIfTI's are millimetres mostly, OME-Zarr's nanometres).
type Affine [4][4]float64

// Header is a volume file's geometry.
type Header struct {
	// Shape is (D, H, W).
	Shape [3]int
	// Channels is the number of volumes the file holds (a 4th axis of
	// channels or modalities; 1 for a 3D file).
	Channels int
	// Spacing is the voxel size along (D, H, W), in Unit.
	Spacing [3]float64
	// Affine is the voxel-to-world matrix, in Unit.
	Affine Affine
	// Unit is the length unit of Spacing and Affine as the file states
	// it, spelt as UDUNITS-2 and OME-NGFF do ("nanometer", "micrometer",
	// "millimeter", …; see NormalizeUnit), or as written when it is no
	// length unit NormalizeUnit knows. "": the format does not say (a
	// MetaImage, a plain TIFF, a NIfTI file whose xyzt_units is 0). The
	// numbers are never converted on reading; InUnit converts them.
	Unit string
}

// File is an open volume file. Its header is read; voxels are read on
// demand, as float32 in the file's units (scaled as the format says).
type File interface {
	// Header returns the file's geometry.
	Header() Header
	// ReadRegion reads box (inside the volume) of every channel: dst holds
	// one slice of box.Voxels() values per channel. A format whose data is
	// a stream (a .nii.gz) reads no further than the box's last plane.
	ReadRegion(box Box, dst [][]float32) error
	// ReadLabels reads box of a one-channel label map as class indices; a
	// value that is not an integer in 0..255 is an error naming the file.
	ReadLabels(box Box, dst []uint8) error
	// Close releases the file.
	Close() error
}

// Chunked is implemented by a File whose voxels are stored in chunks
// that are read and decoded independently (Zarr, N5): reading a region
// decodes only the chunks it overlaps, so a small box of a large volume
// is cheap to read, whereas a stream (a .nii.gz) is read from its start.
type Chunked interface {
	// ChunkShape is the (D, H, W) shape of the chunks (the last along an
	// axis may be cut by the volume's edge).
	ChunkShape() [3]int
}

// Format is one file format: Match recognises its file names, Open opens
// one (reading the header).
type Format struct {
	Name  string
	Match func(path string) bool
	Open  func(path string) (File, error)
	// URLs: Open also reads http:// and https:// URLs that Match
	// accepts (a format without it is never given one).
	URLs bool
	// WriteLabels, when the format writes label maps, writes labels
	// (h.Shape's D·H·W class indices, x fastest) to path with h's
	// geometry (Spacing, Affine, Unit; Channels is ignored), replacing
	// path whole (never a half-written file under its name).
	WriteLabels func(path string, h Header, labels []uint8) error
	// WriteMatch, when Match also looks at the file system (a folder of
	// TIFF slices), recognises the names WriteLabels writes by the name
	// alone; nil: Match.
	WriteMatch func(path string) bool
	// Endings are the file name endings of its files as a folder lists
	// them, one per volume (NIfTI's ".nii.gz", ".nii", ".hdr.gz", ".hdr",
	// not a pair's ".img"), in lower case: what FileEnding finds.
	Endings []string
	// Files, when WriteLabels writes more than path (a detached data
	// file, a sidecar), returns every file a write of path creates, path
	// first; nil: path alone.
	Files func(path string) []string
	// Reads, when a volume is read from more files than path (a detached
	// header's data file, a spacing sidecar), returns those others as far
	// as they can be told (nothing for a file whose header cannot be
	// read: opening it says why); nil: path alone.
	Reads func(path string) []string
}

// ReadFiles returns the files the volume at path is read from: path, and
// those its format's Reads names (a .nhdr's data file, a .tif's nnU-Net
// spacing file), so that a prediction is never written over any of them.
func ReadFiles(path string) []string {
	out := []string{path}
	mu.RLock()
	var reads func(string) []string
	for _, f := range formats {
		if f.Match(path) {
			reads = f.Reads
			break
		}
	}
	mu.RUnlock()
	if reads != nil {
		out = append(out, reads(path)...)
	}
	return out
}

// FileEnding returns the ending of a volume file's name among the
// registered formats' Endings, the longest that matches (".nii.gz" over
// ".gz"-less names), as name spells it; "" when none does. A prediction
// of a case is named ID + the ending of the case's files, as nnU-Net's
// file_ending.
func FileEnding(name string) string {
	l := strings.ToLower(name)
	best := 0
	mu.RLock()
	defer mu.RUnlock()
	for _, f := range formats {
		for _, e := range f.Endings {
			if len(e) > best && len(l) > len(e) && strings.HasSuffix(l, e) {
				best = len(e)
			}
		}
	}
	return name[len(name)-best:]
}

// Endings returns the registered formats' Endings, longest first (the
// order in which a name is tested against them: ".nii.gz" before ".gz"-
// less ones).
func Endings() []string {
	mu.RLock()
	var out []string
	for _, f := range formats {
		out = append(out, f.Endings...)
	}
	mu.RUnlock()
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// WrittenFiles returns the files WriteLabels(path, …) creates, path
// first (Files of path's format).
func WrittenFiles(path string) []string {
	if f, ok := writer(path); ok && f.Files != nil {
		return f.Files(path)
	}
	return []string{path}
}

// writer returns the first registered format whose written names path
// matches (by WriteMatch, else Match), as Open takes the first that reads
// it; ok is false when none does.
func writer(path string) (f Format, ok bool) {
	mu.RLock()
	defer mu.RUnlock()
	for _, g := range formats {
		match := g.Match
		if g.WriteMatch != nil {
			match = g.WriteMatch
		}
		if match(path) {
			return g, true
		}
	}
	return Format{}, false
}

// WriteLabels writes a label map to path in the format path's name
// matches (WriteLabels of Format). An error names path: no format
// matches it, or the format writes no label maps.
func WriteLabels(path string, h Header, labels []uint8) error {
	f, ok := writer(path)
	switch {
	case !ok:
		return fmt.Errorf("%s: %w", path, ErrFormat)
	case f.WriteLabels == nil:
		return fmt.Errorf("%s: voxtrain writes no %s label maps", path, f.Name)
	}
	write := f.WriteLabels
	if n := int64(h.Shape[0]) * int64(h.Shape[1]) * int64(h.Shape[2]); n != int64(len(labels)) {
		return fmt.Errorf("write %s: %d labels for a %d×%d×%d grid", path, len(labels), h.Shape[0], h.Shape[1], h.Shape[2])
	}
	return write(path, h, labels)
}

// Writes reports whether a format whose names path matches writes label
// maps.
func Writes(path string) bool {
	f, ok := writer(path)
	return ok && f.WriteLabels != nil
}

// IsURL reports whether path is an http:// or https:// URL rather than a
// file path.
func IsURL(path string) bool {
	l := strings.ToLower(path[:min(len(path), 8)])
	return strings.HasPrefix(l, "http://") || strings.HasPrefix(l, "https://")
}

// ReadsURL reports whether a registered format reads path, an http(s)
// URL, over the network.
func ReadsURL(path string) bool {
	if !IsURL(path) {
		return false
	}
	mu.RLock()
	defer mu.RUnlock()
	for _, f := range formats {
		if f.URLs && f.Match(path) {
			return true
		}
	}
	return false
}

var (
	mu      sync.RWMutex
	formats []Format
)

// Register adds a format; Open tries formats in the order they were
// registered.
func Register(f Format) {
	mu.Lock()
	defer mu.Unlock()
	formats = append(formats, f)
}

// ErrFormat is the error (wrapped) for a file no registered format reads.
var ErrFormat = errors.New("no volume format reads this file")

// Readable reports whether a registered format matches path's name (a
// file ending such as ".nii.gz" is tested as a name with that ending).
func Readable(path string) bool {
	path = FilePath(path)
	mu.RLock()
	defer mu.RUnlock()
	for _, f := range formats {
		if f.Match(path) {
			return true
		}
	}
	return false
}

// FormatName returns the name of the first registered format that
// matches path ("" when none does).
func FormatName(path string) string {
	path = FilePath(path)
	mu.RLock()
	defer mu.RUnlock()
	for _, f := range formats {
		if f.Match(path) {
			return f.Name
		}
	}
	return ""
}

// Formats returns the names of the registered formats.
func Formats() []string {
	mu.RLock()
	defer mu.RUnlock()
	names := make([]string, len(formats))
	for i, f := range formats {
		names[i] = f.Name
	}
	return names
}

// Open opens path with the first registered format that matches it; a
// window's path (WindowPath) opens its file's window, and a masked
// label's path (MaskedPath) its label with the mask applied, and a
// resampled file's path (ResampledPath) its file on the grid it names
// (a window of one, a raw read at a manifest's target spacing, too);
// a bit-packed or looked-up label's path (PackedPath, LUTPath) its
// multi-label bytes.
func Open(path string) (File, error) {
	if f, ok, err := OpenDerived(path, Open, true); ok {
		return f, err
	}
	mu.RLock()
	fs := formats
	mu.RUnlock()
	url := IsURL(path)
	for _, f := range fs {
		if f.Match(path) && (f.URLs || !url) {
			return f.Open(path)
		}
	}
	return nil, fmt.Errorf("%s: %w (formats: %v)", path, ErrFormat, Formats())
}

// ToLabels converts class indices read as float32 into dst (a File's
// ReadLabels after decoding); a value that is not an integer in 0..255 is
// an error naming the file (name) and the voxel's index in src.
func ToLabels(dst []uint8, src []float32, name string) error {
	for i, x := range src {
		u := int32(x)
		if float32(u) != x || uint32(u) > 255 {
			return fmt.Errorf("%s: voxel %d has value %g, not a class index 0..255", name, i, x)
		}
		dst[i] = uint8(u)
	}
	return nil
}
