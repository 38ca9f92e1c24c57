package zarr

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/zlib"

	"github.com/voxtrain/voxtrain/internal/atomicfile"
	"github.com/voxtrain/voxtrain/volume"
)

// ImageSpec describes an OME-NGFF 0.4 image that CreateImage writes: a
// group whose .zattrs hold one multiscale of one level, "0", a Zarr v2
// array of (z, y, x), or (c, z, y, x) with a channel axis.
type ImageSpec struct {
	// Name is the multiscale's name (e.g. "labels").
	Name string
	// Shape is (z, y, x); Chunks the chunk grid's (z, y, x). A chunk
	// holds every channel.
	Shape, Chunks [3]int
	// Channels is the length of the channel axis c; 0 for none.
	Channels int
	// DType is "uint8" (NumPy |u1) or "float32" (<f4).
	DType string
	// Spacing and Origin are level 0's scale and translation along
	// (z, y, x): world = Spacing·index + Origin.
	Spacing, Origin [3]float64
	// Unit is the spatial axes' OME unit ("millimeter", …; "": none).
	Unit string
	// Compressor is "blosc-zstd" (the default: numcodecs' Blosc with
	// zstd and byte shuffle) or "zlib".
	Compressor string
}

// ImageWriter writes chunks of an image's level 0. Its methods may be
// called concurrently for different chunks: each chunk is written to a
// temporary file in the array's directory (package atomicfile) and
// renamed into place, so a
// reader (or a crash) sees a chunk whole or not at all, and a missing
// chunk reads as the fill value 0.
type ImageWriter struct {
	dir      string // the array's directory (<image>/0)
	spec     ImageSpec
	elemSize int
}

// compressorJSON is the .zarray compressor entry of a Compressor name.
func compressorJSON(name string) (map[string]any, error) {
	switch name {
	case "", "blosc-zstd":
		return map[string]any{"id": "blosc", "cname": "zstd", "clevel": 3, "shuffle": 1, "blocksize": 0}, nil
	case "zlib":
		return map[string]any{"id": "zlib", "level": 3}, nil
	}
	return nil, fmt.Errorf("compressor %q: want blosc-zstd or zlib", name)
}

func dtypeOf(name string) (string, int, error) {
	switch name {
	case "uint8":
		return "|u1", 1, nil
	case "float32":
		return "<f4", 4, nil
	}
	return "", 0, fmt.Errorf("dtype %q: want uint8 or float32", name)
}

// CreateImage creates the image group dir (which must not exist or be
// empty) with its metadata and an empty level 0: every chunk missing,
// reading as 0 until written.
func CreateImage(dir string, spec ImageSpec) (*ImageWriter, error) {
	if isURL(dir) {
		return nil, fmt.Errorf("zarr: %s: stores are written to local folders only, not over http(s)", dir)
	}
	dt, size, err := dtypeOf(spec.DType)
	if err != nil {
		return nil, fmt.Errorf("zarr: %s: %w", dir, err)
	}
	comp, err := compressorJSON(spec.Compressor)
	if err != nil {
		return nil, fmt.Errorf("zarr: %s: %w", dir, err)
	}
	// The image is written block by block (WriteBlock): only its
	// addressing is bounded, not its memory, so a huge prediction's
	// labels are written as they are read.
	if spec.Channels < 0 {
		return nil, fmt.Errorf("zarr: %s: %d channels", dir, spec.Channels)
	}
	if err := volume.CheckValues(spec.Shape, max(spec.Channels, 1)); err != nil {
		return nil, fmt.Errorf("zarr: %s: %w", dir, err)
	}
	for i := range 3 {
		if !(spec.Spacing[i] > 0) || math.IsInf(spec.Spacing[i], 0) || math.IsNaN(spec.Origin[i]) || math.IsInf(spec.Origin[i], 0) {
			return nil, fmt.Errorf("zarr: %s: spacing %v, origin %v: want finite, positive spacings", dir, spec.Spacing, spec.Origin)
		}
	}
	shape, chunks := spec.Shape[:], spec.Chunks[:]
	if spec.Channels > 0 {
		shape = append([]int{spec.Channels}, shape...)
		chunks = append([]int{spec.Channels}, chunks...)
	}
	// The reader's grid bounds (an axis past 2^31−1, a chunk past
	// maxChunkBytes): an image it could not open is refused before a
	// block is written, not after a long prediction.
	if err := checkGrid(shape, chunks, size, "zarr: "+dir); err != nil {
		return nil, err
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return nil, fmt.Errorf("zarr: %s exists and is not empty", dir)
	}
	level := filepath.Join(dir, "0")
	if err := os.MkdirAll(level, 0o755); err != nil {
		return nil, fmt.Errorf("zarr: %w", err)
	}
	axes := []map[string]string{}
	scale := []float64{spec.Spacing[0], spec.Spacing[1], spec.Spacing[2]}
	trans := []float64{spec.Origin[0], spec.Origin[1], spec.Origin[2]}
	if spec.Channels > 0 {
		axes = append(axes, map[string]string{"name": "c", "type": "channel"})
		scale = append([]float64{1}, scale...)
		trans = append([]float64{0}, trans...)
	}
	for _, n := range []string{"z", "y", "x"} {
		a := map[string]string{"name": n, "type": "space"}
		if spec.Unit != "" {
			a["unit"] = spec.Unit
		}
		axes = append(axes, a)
	}
	zarray := map[string]any{
		"zarr_format": 2, "shape": shape, "chunks": chunks, "dtype": dt, "compressor": comp,
		"fill_value": 0, "filters": nil, "order": "C", "dimension_separator": ".",
	}
	attrs := map[string]any{"multiscales": []any{map[string]any{
		"version": "0.4",
		"name":    spec.Name,
		"axes":    axes,
		"datasets": []any{map[string]any{"path": "0", "coordinateTransformations": []any{
			map[string]any{"type": "scale", "scale": scale},
			map[string]any{"type": "translation", "translation": trans},
		}}},
	}}}
	group := map[string]any{"zarr_format": 2}
	for _, f := range []struct {
		path string
		v    any
	}{{filepath.Join(level, ".zarray"), zarray}, {filepath.Join(dir, ".zgroup"), group}, {filepath.Join(dir, ".zattrs"), attrs}} {
		b, err := json.MarshalIndent(f.v, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("zarr: %s: %w", f.path, err)
		}
		if err := atomicfile.WriteFileUmask(f.path, append(b, '\n'), 0o666); err != nil {
			return nil, fmt.Errorf("zarr: %w", err)
		}
	}
	return &ImageWriter{dir: level, spec: spec, elemSize: size}, nil
}

// OpenImage reopens an image CreateImage made (to write the chunks a
// stopped run left missing); spec must be the one it was created with,
// which is checked against the stored level 0.
func OpenImage(dir string, spec ImageSpec) (*ImageWriter, error) {
	if isURL(dir) {
		return nil, fmt.Errorf("zarr: %s: stores are written to local folders only, not over http(s)", dir)
	}
	_, size, err := dtypeOf(spec.DType)
	if err != nil {
		return nil, fmt.Errorf("zarr: %s: %w", dir, err)
	}
	level := filepath.Join(dir, "0")
	m, err := localSource().readV2(level)
	if err != nil {
		return nil, err
	}
	want := spec.Shape[:]
	wantChunks := spec.Chunks[:]
	if spec.Channels > 0 {
		want = append([]int{spec.Channels}, want...)
		wantChunks = append([]int{spec.Channels}, wantChunks...)
	}
	if fmt.Sprint(m.shape) != fmt.Sprint(want) || fmt.Sprint(m.chunks) != fmt.Sprint(wantChunks) || m.codec.dt.size != size {
		return nil, fmt.Errorf("zarr: %s: shape %v, chunks %v, %v; this run writes shape %v, chunks %v, %s",
			m.file, m.shape, m.chunks, m.codec.dt, want, wantChunks, spec.DType)
	}
	return &ImageWriter{dir: level, spec: spec, elemSize: size}, nil
}

// Dir returns the directory of the image's level 0 array.
func (w *ImageWriter) Dir() string { return w.dir }

// WriteBlock writes box (in (z, y, x) voxels) of the image, which must
// be whole chunks: box.Lo on the chunk grid, box.Hi on it or at the
// image's edge. src is []uint8 or []float32 as the image's DType, holding
// box.Voxels() values per channel, channel-major (C, z, y, x order, x
// fastest). Every chunk of box is written atomically.
func (w *ImageWriter) WriteBlock(box volume.Box, src any) error {
	sp := w.spec
	for i := range 3 {
		if box.Lo[i] < 0 || box.Lo[i]%sp.Chunks[i] != 0 || box.Hi[i] > sp.Shape[i] || box.Hi[i] <= box.Lo[i] ||
			(box.Hi[i]%sp.Chunks[i] != 0 && box.Hi[i] != sp.Shape[i]) {
			return fmt.Errorf("zarr: %s: block %v is not whole chunks %v of shape %v", w.dir, box, sp.Chunks, sp.Shape)
		}
	}
	nc := max(sp.Channels, 1)
	var raw []byte
	switch s := src.(type) {
	case []uint8:
		if sp.DType != "uint8" {
			return fmt.Errorf("zarr: %s: uint8 data for a %s image", w.dir, sp.DType)
		}
		raw = s
	case []float32:
		if sp.DType != "float32" {
			return fmt.Errorf("zarr: %s: float32 data for a %s image", w.dir, sp.DType)
		}
		raw = make([]byte, 4*len(s))
		for i, v := range s {
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
		}
	default:
		return fmt.Errorf("zarr: %s: data of type %T, want []uint8 or []float32", w.dir, src)
	}
	if len(raw) != nc*box.Voxels()*w.elemSize {
		return fmt.Errorf("zarr: %s: %d bytes for %d channels of block %v", w.dir, len(raw), nc, box)
	}
	bs := box.Size()
	ch := sp.Chunks
	es := w.elemSize
	chunk := make([]byte, nc*ch[0]*ch[1]*ch[2]*es)
	for z0 := box.Lo[0]; z0 < box.Hi[0]; z0 += ch[0] {
		for y0 := box.Lo[1]; y0 < box.Hi[1]; y0 += ch[1] {
			for x0 := box.Lo[2]; x0 < box.Hi[2]; x0 += ch[2] {
				// A chunk at the edge is stored whole, padded with the
				// fill value, as Zarr v2 stores edge chunks.
				clear(chunk)
				nz, ny, nx := min(ch[0], box.Hi[0]-z0), min(ch[1], box.Hi[1]-y0), min(ch[2], box.Hi[2]-x0)
				for c := range nc {
					for z := range nz {
						for y := range ny {
							s := (((c*bs[0]+z0-box.Lo[0]+z)*bs[1]+y0-box.Lo[1]+y)*bs[2] + x0 - box.Lo[2]) * es
							d := (((c*ch[0]+z)*ch[1] + y) * ch[2]) * es
							copy(chunk[d:d+nx*es], raw[s:s+nx*es])
						}
					}
				}
				key := fmt.Sprintf("%d.%d.%d", z0/ch[0], y0/ch[1], x0/ch[2])
				if sp.Channels > 0 {
					key = "0." + key
				}
				if err := w.writeChunk(key, chunk); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// writeChunk encodes one chunk and puts it in place atomically.
func (w *ImageWriter) writeChunk(key string, chunk []byte) error {
	var enc []byte
	var err error
	switch w.spec.Compressor {
	case "", "blosc-zstd":
		// 256 KiB blocks, as c-blosc picks for zstd at a middle level.
		bs := min(len(chunk), 256<<10)
		bs -= bs % w.elemSize
		enc, err = bloscEncode(chunk, w.elemSize, max(bs, w.elemSize), bloscShuffle, bloscZstd)
	case "zlib":
		var b strings.Builder
		zw, _ := zlib.NewWriterLevel(&b, 3)
		if _, err = zw.Write(chunk); err == nil {
			err = zw.Close()
		}
		enc = []byte(b.String())
	}
	if err != nil {
		return fmt.Errorf("zarr: %s: chunk %s: %w", w.dir, key, err)
	}
	f, err := atomicfile.CreateUmask(filepath.Join(w.dir, key), 0o666)
	if err != nil {
		return fmt.Errorf("zarr: %w", err)
	}
	defer f.Close()
	if _, err := f.Write(enc); err != nil {
		return fmt.Errorf("zarr: %s: chunk %s: %w", w.dir, key, err)
	}
	if err := f.Commit(); err != nil {
		return fmt.Errorf("zarr: %w", err)
	}
	return nil
}

// Sync makes the chunks written so far survive a power loss (an fsync of
// the array's directory; each chunk's data is synced as it is written),
// for a caller about to record them as written.
func (w *ImageWriter) Sync() error {
	return atomicfile.SyncDir(w.dir)
}
