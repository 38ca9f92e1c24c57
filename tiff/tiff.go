// Package tiff reads 3-D TIFF stacks for the data pipeline: each page of
// a multi-page file is one plane along D. It registers a volume.Format,
// so volume.Open reads .tif and .tiff files once the package is linked in,
// and volume.WriteLabels writes label maps as them (WriteLabels).
//
// Supported: classic TIFF and BigTIFF, either byte order; striped and
// tiled pages; 8-, 16-, 32- and 64-bit integer and 32/64-bit float
// samples; one or more samples per pixel (chunky: the channels);
// compression none, LZW, deflate (both codes), PackBits and zstd, with
// predictor 2 (horizontal differencing) or 3 (floating point). Spacing
// comes from ImageJ metadata (XResolution, YResolution and "spacing=") or
// from OME-XML's PhysicalSizeX/Y/Z, their unit from ImageJ's unit= (and
// yunit=, zunit=; "micron", "µm", "um") or OME's PhysicalSizeXUnit, … (µm,
// the OME schema's default, when a PhysicalSize has none), the same for
// every axis that states one; ImageJ and OME channels stored as
// pages are read as channels. The affine is the diagonal of the spacing:
// a TIFF has no orientation. Only the IFDs are read on open; a region
// reads the strips or tiles it overlaps, in the pages it spans.
//
// nnU-Net's spacing sidecar: nnU-Net v2 (Tiff3DIO) ignores TIFF metadata
// and keeps a case's voxel size in DIR/STEM.json beside DIR/STEM.tif(f),
// {"spacing": [D, H, W]}; for an image CASE_0000.tif, whose STEM ends in
// a channel suffix (_ and 4 digits), DIR/CASE.json when there is no
// CASE_0000.json. Open uses it when present, and it wins over the ImageJ
// or OME metadata as in nnU-Net: spacing from it, the affine its
// diagonal. It states no unit, so the unit is "" unless the TIFF's own
// metadata states the same spacing in a unit (as WriteLabels' files do).
// A JSON file there that is not an object with a "spacing" key, or is
// larger than 16 KiB, is not a sidecar and is ignored; one that is not
// JSON, or whose "spacing" is not three positive finite numbers, is an
// error naming it. Folders of slices have no sidecar. WriteLabels writes
// one beside every label map.
//
// A folder of 2-D TIFF slices is one volume too (OpenFolder): its files
// in natural numeric order are the planes, read lazily, slice by slice.
//
// Not supported: JPEG and other lossy codecs, bilevel and palette
// images, and planar (separate) channel storage.
package tiff

import (
	"encoding/binary"
	"fmt"
	"html"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/voxtrain/voxtrain/internal/rawvol"
	"github.com/voxtrain/voxtrain/volume"
)

func init() {
	volume.Register(volume.Format{Name: "tiff", Match: Match, Open: Open, WriteLabels: WriteLabels,
		WriteMatch: matchName, Endings: []string{".tif", ".tiff"},
		Files: func(path string) []string { return []string{path, sidecarPaths(path)[0]} },
		Reads: existingSidecars})
}

// Match reports whether path names a TIFF file (.tif, .tiff) or is a
// folder of TIFF slices (one among the first entries it lists; Open then
// checks them all).
func Match(path string) bool {
	return matchName(path) || !volume.IsURL(path) && matchFolder(path)
}

// matchName reports whether path's name is a TIFF file's (.tif, .tiff):
// the names WriteLabels writes, whatever is on disk.
func matchName(path string) bool {
	l := strings.ToLower(path)
	return strings.HasSuffix(l, ".tif") || strings.HasSuffix(l, ".tiff")
}

// page is one image of the stack: where its strips or tiles are.
type page struct {
	offsets, counts []uint64
}

// File is an open TIFF stack.
type File struct {
	f    *os.File
	r    reader
	hdr  volume.Header
	typ  rawvol.Type
	spp  int // samples per pixel
	comp uint64
	pred uint64
	// Chunk geometry: strips are tiles as wide as the page.
	tileW, tileH int
	tiled        bool
	pages        []page
	// pageOf maps (channel, plane) to a page index.
	pageOf func(c, z int) int
	// Description is the first page's ImageDescription.
	Description string
}

// Open opens a TIFF stack, reading its IFDs, or a folder of 2-D TIFF
// slices (OpenFolder). A stack with an nnU-Net spacing sidecar (see the
// package documentation) takes its spacing from it.
func Open(path string) (volume.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if st.IsDir() {
		f.Close()
		return OpenFolder(path)
	}
	t, err := open(f, st.Size(), path)
	if err == nil {
		err = t.applySidecar(path)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	t.f = f
	return t, nil
}

func open(ra readerAt, size int64, name string) (*File, error) {
	t := &File{r: reader{r: ra, size: size, name: name}}
	r := &t.r
	b, err := r.readAt(0, 8, "header")
	if err != nil {
		return nil, err
	}
	switch string(b[:2]) {
	case "II":
		r.bo = binary.LittleEndian
	case "MM":
		r.bo = binary.BigEndian
	default:
		return nil, r.errf("header: byte order %q, want II or MM", b[:2])
	}
	var first uint64
	switch r.bo.Uint16(b[2:]) {
	case 42:
		first = uint64(r.bo.Uint32(b[4:]))
	case 43:
		r.big = true
		if b, err = r.readAt(0, 16, "BigTIFF header"); err != nil {
			return nil, err
		}
		if r.bo.Uint16(b[4:]) != 8 {
			return nil, r.errf("BigTIFF header: offset size %d, want 8", r.bo.Uint16(b[4:]))
		}
		first = r.bo.Uint64(b[8:])
	default:
		return nil, r.errf("header: version %d, want 42 (TIFF) or 43 (BigTIFF)", r.bo.Uint16(b[2:]))
	}

	seen := map[uint64]bool{}
	var width, height uint64
	var bps, format uint64
	for off := first; off != 0; {
		if seen[off] {
			return nil, r.errf("IFD at %d: the chain of IFDs loops", off)
		}
		seen[off] = true
		m, next, err := r.ifd(off)
		if err != nil {
			return nil, err
		}
		off = next
		if sub, _ := r.uint1(m, tNewSubfileType, 0); sub&1 != 0 {
			continue // a reduced-resolution copy, not a plane
		}
		p, w, h, err := t.page(m, len(t.pages) == 0)
		if err != nil {
			return nil, fmt.Errorf("%w (page %d)", err, len(t.pages))
		}
		if len(t.pages) == 0 {
			width, height = w, h
			bps, _ = r.uint1(m, tBitsPerSample, 1)
			format, _ = r.uint1(m, tSampleFormat, 1)
			t.Description = r.ascii(m, tImageDesc, 1<<20)
			t.hdr.Spacing = [3]float64{1, 1, 1}
			if x := r.rational(m, tXResolution); x > 0 {
				t.hdr.Spacing[2] = 1 / x
			}
			if y := r.rational(m, tYResolution); y > 0 {
				t.hdr.Spacing[1] = 1 / y
			}
		} else if w != width || h != height {
			return nil, r.errf("page %d is %d×%d, page 0 %d×%d", len(t.pages), w, h, width, height)
		} else if b, _ := r.uint1(m, tBitsPerSample, 1); b != bps {
			return nil, r.errf("page %d: BitsPerSample %d, page 0 %d", len(t.pages), b, bps)
		}
		t.pages = append(t.pages, p)
	}
	if len(t.pages) == 0 {
		return nil, r.errf("no image")
	}
	if t.typ, err = sampleType(bps, format); err != nil {
		return nil, r.errf("%v", err)
	}
	if err := t.stack(int(width), int(height)); err != nil {
		return nil, err
	}
	return t, nil
}

// page reads one IFD's layout; the first page also sets the file's
// sample layout and codec, which the others must share.
func (t *File) page(m map[uint16]entry, first bool) (page, uint64, uint64, error) {
	r := &t.r
	var p page
	w, err := r.uint1(m, tImageWidth, 0)
	if err != nil {
		return p, 0, 0, err
	}
	h, err := r.uint1(m, tImageLength, 0)
	if err != nil {
		return p, 0, 0, err
	}
	if w == 0 || h == 0 || w > 1<<31 || h > 1<<31 {
		return p, 0, 0, r.errf("ImageWidth×ImageLength %d×%d", w, h)
	}
	spp, err := r.uint1(m, tSamplesPerPixel, 1)
	if err != nil {
		return p, 0, 0, err
	}
	comp, err := r.uint1(m, tCompression, 1)
	if err != nil {
		return p, 0, 0, err
	}
	pred, err := r.uint1(m, tPredictor, 1)
	if err != nil {
		return p, 0, 0, err
	}
	planar, _ := r.uint1(m, tPlanarConfig, 1)
	if spp < 1 || spp > 64 {
		return p, 0, 0, r.errf("SamplesPerPixel %d", spp)
	}
	if planar != 1 && spp > 1 {
		return p, 0, 0, r.errf("PlanarConfiguration %d (separate planes): %v", planar, rawvol.ErrUnsupported)
	}
	tw, _ := r.uint1(m, tTileWidth, 0)
	th, _ := r.uint1(m, tTileLength, 0)
	tiled := tw > 0 || th > 0
	offTag, cntTag := uint16(tStripOffsets), uint16(tStripByteCounts)
	if tiled {
		offTag, cntTag = tTileOffsets, tTileByteCounts
		if tw == 0 || th == 0 || tw > 1<<16 || th > 1<<16 {
			return p, 0, 0, r.errf("TileWidth×TileLength %d×%d", tw, th)
		}
	} else {
		rps, err := r.uint1(m, tRowsPerStrip, h)
		if err != nil {
			return p, 0, 0, err
		}
		tw, th = w, min(max(rps, 1), h)
	}
	if first {
		// A strip or tile is decoded whole (ReadRegion reads a region
		// strip by strip, tile by tile): it, not the stack, must fit in
		// memory. A stack of any size reads by region.
		// In float64: a strip of 2^31 rows of 2^31 pixels wraps a uint64.
		if n := float64(th) * float64(tw) * float64(spp); n > volume.MaxInMemory {
			kind := "strip"
			if tiled {
				kind = "tile"
			}
			return p, 0, 0, fmt.Errorf("tiff: %s: a %s of %d×%d pixels × %d samples (%.3g values) is decoded whole, more than 2^31−1 values: %w; rewrite the stack tiled or with fewer RowsPerStrip",
				r.name, kind, th, tw, spp, n, volume.ErrTooLarge)
		}
		t.spp, t.comp, t.pred, t.tiled, t.tileW, t.tileH = int(spp), comp, pred, tiled, int(tw), int(th)
		switch comp {
		case 1, 5, 8, 32946, 32773, 50000:
		default:
			return p, 0, 0, r.errf("Compression %d: %v", comp, rawvol.ErrUnsupported)
		}
		if pred < 1 || pred > 3 {
			return p, 0, 0, r.errf("Predictor %d: %v", pred, rawvol.ErrUnsupported)
		}
	} else if int(spp) != t.spp || comp != t.comp || pred != t.pred || tiled != t.tiled || int(tw) != t.tileW || int(th) != t.tileH {
		return p, 0, 0, r.errf("SamplesPerPixel, Compression, Predictor or chunk size differ from page 0's")
	}
	chunks := ((w + tw - 1) / tw) * ((h + th - 1) / th)
	if p.offsets, err = r.uints(m, offTag); err != nil {
		return p, 0, 0, err
	}
	if p.counts, err = r.uints(m, cntTag); err != nil {
		return p, 0, 0, err
	}
	if uint64(len(p.offsets)) != chunks || uint64(len(p.counts)) != chunks {
		return p, 0, 0, r.errf("%s: %d offsets and %d byte counts for %d chunks", tagName(offTag), len(p.offsets), len(p.counts), chunks)
	}
	for i, o := range p.offsets {
		if o > uint64(r.size) || p.counts[i] > uint64(r.size)-o {
			return p, 0, 0, r.errf("%s: chunk %d (%d bytes at %d) past the end of the %d-byte file", tagName(offTag), i, p.counts[i], o, r.size)
		}
	}
	return p, w, h, nil
}

// sampleType maps BitsPerSample and SampleFormat to a sample type.
func sampleType(bps, format uint64) (rawvol.Type, error) {
	type key struct{ b, f uint64 }
	t, ok := map[key]rawvol.Type{
		{8, 1}: rawvol.Uint8, {8, 2}: rawvol.Int8, {16, 1}: rawvol.Uint16, {16, 2}: rawvol.Int16,
		{32, 1}: rawvol.Uint32, {32, 2}: rawvol.Int32, {64, 1}: rawvol.Uint64, {64, 2}: rawvol.Int64,
		{32, 3}: rawvol.Float32, {64, 3}: rawvol.Float64,
	}[key{bps, format}]
	if !ok {
		return 0, fmt.Errorf("BitsPerSample %d with SampleFormat %d: %w", bps, format, rawvol.ErrUnsupported)
	}
	return t, nil
}

var (
	reOMEAttr = regexp.MustCompile(`\b(PhysicalSize[XYZ](?:Unit)?|Size[CZT]|DimensionOrder)="([^"]*)"`)
	reIJLine  = regexp.MustCompile(`(?m)^(\w+)=(.*)$`)
)

// stack sets the volume's shape, channels and spacing from the pages and
// the ImageJ or OME metadata.
func (t *File) stack(w, h int) error {
	n := len(t.pages)
	planes, chans := n, 1
	pageOf := func(c, z int) int { return z }
	desc := t.Description
	switch {
	case strings.HasPrefix(desc, "ImageJ="):
		kv := map[string]string{}
		for _, m := range reIJLine.FindAllStringSubmatch(desc, -1) {
			kv[m[1]] = strings.TrimSpace(m[2])
		}
		if s, err := strconv.ParseFloat(kv["spacing"], 64); err == nil && s > 0 {
			t.hdr.Spacing[0] = s
		}
		// unit= is x's (and every axis's); ImageJ writes yunit= and
		// zunit= only where they differ.
		units := []string{kv["unit"], kv["unit"], kv["unit"]}
		keys := []string{"unit", "unit", "unit"}
		for i, k := range []string{"zunit", "yunit"} {
			if u, ok := kv[k]; ok {
				units[i], keys[i] = u, k
			}
		}
		for i := range units {
			units[i] = unescapeImageJ(units[i])
		}
		var err error
		if t.hdr.Unit, err = volume.AxesUnit(units, keys); err != nil {
			return t.r.errf("%v", err)
		}
		c, _ := strconv.Atoi(kv["channels"])
		z, _ := strconv.Atoi(kv["slices"])
		f, _ := strconv.Atoi(kv["frames"])
		if f > 1 && z > 1 {
			return t.r.errf("ImageJ hyperstack with %d frames of %d slices: %v", f, z, rawvol.ErrUnsupported)
		}
		if c > 1 {
			if n%c != 0 {
				return t.r.errf("ImageJ channels=%d for %d pages", c, n)
			}
			// ImageJ stores channel fastest: page = z·C + c.
			chans, planes = c, n/c
			pageOf = func(ch, z int) int { return z*c + ch }
		}
	case strings.Contains(desc, "<OME"):
		kv := map[string]string{}
		for _, m := range reOMEAttr.FindAllStringSubmatch(desc, -1) {
			if _, ok := kv[m[1]]; !ok { // the first image's
				kv[m[1]] = m[2]
			}
		}
		t.hdr.Spacing = [3]float64{1, 1, 1}
		// A PhysicalSize without its Unit is in µm, the OME schema's
		// default; an axis without a PhysicalSize has no spacing, hence
		// no unit to agree on, and is left out.
		var units, keys []string
		for i, k := range []string{"PhysicalSizeZ", "PhysicalSizeY", "PhysicalSizeX"} {
			if s, err := strconv.ParseFloat(kv[k], 64); err == nil && s > 0 {
				t.hdr.Spacing[i] = s
				u := "µm"
				if v, ok := kv[k+"Unit"]; ok {
					u = html.UnescapeString(v)
				}
				units, keys = append(units, u), append(keys, k+"Unit")
			}
		}
		var err error
		if t.hdr.Unit, err = volume.AxesUnit(units, keys); err != nil {
			return t.r.errf("%v", err)
		}
		c, _ := strconv.Atoi(kv["SizeC"])
		z, _ := strconv.Atoi(kv["SizeZ"])
		tt, _ := strconv.Atoi(kv["SizeT"])
		if tt > 1 && z > 1 {
			return t.r.errf("OME image with SizeT=%d and SizeZ=%d: %v", tt, z, rawvol.ErrUnsupported)
		}
		if c > 1 && t.spp == 1 {
			if n%c != 0 {
				return t.r.errf("OME SizeC=%d for %d pages", c, n)
			}
			chans, planes = c, n/c
			order := kv["DimensionOrder"]
			if strings.Index(order, "C") < strings.Index(order, "Z") {
				pageOf = func(ch, z int) int { return z*c + ch }
			} else {
				pageOf = func(ch, z int) int { return ch*planes + z }
			}
		}
	default:
		// A plain TIFF's resolution is usually dots per inch, not a voxel size.
		t.hdr.Spacing = [3]float64{1, 1, 1}
	}
	if chans > 1 && t.spp > 1 {
		return t.r.errf("channels both as pages and as samples: %v", rawvol.ErrUnsupported)
	}
	if t.spp > 1 {
		chans = t.spp
	}
	t.pageOf = pageOf
	t.hdr.Shape = [3]int{planes, h, w}
	t.hdr.Channels = chans
	// Regions are read strip by strip (tile by tile), so only the
	// addressing of the stack is bounded; a BigTIFF stack may exceed
	// 2^31 voxels.
	if err := volume.CheckShape(t.hdr.Shape); err != nil {
		return t.r.errf("%v", err)
	}
	for i := range 3 {
		t.hdr.Affine[2-i][2-i] = t.hdr.Spacing[i]
	}
	t.hdr.Affine[3][3] = 1
	return nil
}

// unescapeImageJ decodes the \uXXXX escapes ImageJ writes for the
// characters of its description beyond ASCII (unit=\u00B5m for µm).
func unescapeImageJ(s string) string {
	if !strings.Contains(s, `\u`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+6 <= len(s) && s[i+1] == 'u' {
			if r, err := strconv.ParseUint(s[i+2:i+6], 16, 16); err == nil {
				b.WriteRune(rune(r))
				i += 5
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Header implements volume.File.
func (t *File) Header() volume.Header { return t.hdr }

// Close implements volume.File.
func (t *File) Close() error {
	if t.f != nil {
		return t.f.Close()
	}
	return nil
}
