package tiff

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/voxtrain/voxtrain/internal/atomicfile"
	"github.com/voxtrain/voxtrain/volume"
)

// WriteLabels writes a label map (h.Shape's D·H·W class indices, index
// z·H·W + y·W + x) to path, a .tif or .tiff name, as a stack of D uint8
// pages of H×W, and nnU-Net's spacing sidecar beside it. It is the tiff
// format's volume.Format.WriteLabels.
//
// The TIFF: little-endian, BigTIFF when the file could pass 4 GiB
// (needsBigTIFF); Adobe deflate strips of about 64 KiB with RowsPerStrip,
// no predictor, BlackIsZero. The voxel size is stored as ImageJ does, so
// that this package, Fiji and tifffile's imagej_metadata read it back:
// XResolution and YResolution are 1/spacing with ResolutionUnit none, and
// the first page's ImageDescription is ImageJ's, with images= and
// slices= D, unit= (omitted when h.Unit is "") and spacing= the plane
// distance.
//
// The sidecar: PATHSTEM.json, {"spacing": [D, H, W spacing]}, as nnU-Net's
// Tiff3DIO.write_seg writes beside its predictions, so that nnU-Net reads
// ours (it ignores TIFF metadata); Open reads it too.
//
// Geometry: a TIFF keeps a voxel size per axis and nothing else. The
// spacing written is the column norms of h.Affine (h.Spacing when the
// affine is unset), so an oblique affine's direction and the origin are
// not kept. h.Channels is ignored.
//
// Both files are replaced whole (atomicfile): each is written under a
// temporary name and renamed over its name, never seen half-written. The
// renames follow one another once both files are complete, the
// sidecar's first; only a failure between the two renames leaves a new
// sidecar beside an older TIFF (or none).
func WriteLabels(path string, h volume.Header, labels []uint8) error {
	spacing, desc, err := labelsMeta(path, h, labels)
	if err != nil {
		return err
	}
	jsonPath := sidecarPaths(path)[0]
	sidecar, err := json.Marshal(struct {
		Spacing [3]float64 `json:"spacing"`
	}{spacing})
	if err != nil {
		return fmt.Errorf("tiff: write %s: %w", jsonPath, err)
	}

	tf, err := atomicfile.CreateUmask(path, filePerm)
	if err != nil {
		return fmt.Errorf("tiff: write %s: %w", path, err)
	}
	defer tf.Close() // discards the temporary file unless committed
	bw := bufio.NewWriterSize(tf, 256<<10)
	big := needsBigTIFF(h.Shape, rowsPerStrip(h.Shape[2], h.Shape[1]), len(desc))
	if err := encodeLabels(bw, h.Shape, spacing, desc, labels, big); err != nil {
		return fmt.Errorf("tiff: write %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("tiff: write %s: %w", path, err)
	}
	jf, err := atomicfile.CreateUmask(jsonPath, filePerm)
	if err != nil {
		return fmt.Errorf("tiff: write %s (the nnU-Net spacing sidecar of %s): %w", jsonPath, path, err)
	}
	defer jf.Close()
	if _, err := jf.Write(append(sidecar, '\n')); err != nil {
		return fmt.Errorf("tiff: write %s (the nnU-Net spacing sidecar of %s): %w", jsonPath, path, err)
	}
	// The sidecar first, as a .nhdr's data file goes before its header:
	// a TIFF in place always has its spacing beside it, so that a run
	// stopped between the renames is not taken as done by
	// --continue-prediction (which looks for the TIFF).
	if err := jf.Commit(); err != nil {
		return fmt.Errorf("tiff: write %s (the nnU-Net spacing sidecar of %s): %w", jsonPath, path, err)
	}
	if err := tf.Commit(); err != nil {
		return fmt.Errorf("tiff: write %s (its spacing sidecar %s written): %w", path, jsonPath, err)
	}
	return nil
}

// filePerm is the mode of the files written, filtered by the umask as
// os.Create's is: label maps are data others open in their viewers.
const filePerm = 0o666

// labelsMeta checks WriteLabels' arguments and returns the (D, H, W)
// spacing to write and the ImageJ description.
func labelsMeta(path string, h volume.Header, labels []uint8) ([3]float64, string, error) {
	var spacing [3]float64
	l := strings.ToLower(path)
	if !strings.HasSuffix(l, ".tif") && !strings.HasSuffix(l, ".tiff") {
		return spacing, "", fmt.Errorf("tiff: write %s: not a .tif or .tiff name", path)
	}
	if err := volume.CheckShape(h.Shape); err != nil {
		return spacing, "", fmt.Errorf("tiff: write %s: %w", path, err)
	}
	if h.Shape[1] > 1<<31 || h.Shape[2] > 1<<31 {
		return spacing, "", fmt.Errorf("tiff: write %s: pages of %d×%d pixels, more than TIFF readers take (2^31 a side)", path, h.Shape[1], h.Shape[2])
	}
	if n := int64(h.Shape[0]) * int64(h.Shape[1]) * int64(h.Shape[2]); n != int64(len(labels)) {
		return spacing, "", fmt.Errorf("tiff: write %s: %d labels for a %d×%d×%d grid", path, len(labels), h.Shape[0], h.Shape[1], h.Shape[2])
	}
	spacing = writtenSpacing(h)
	for i, s := range spacing {
		if !(s > 0) || math.IsInf(s, 0) {
			return spacing, "", fmt.Errorf("tiff: write %s: spacing %v (D, H, W): axis %d is not a positive finite voxel size", path, spacing, i)
		}
	}
	for i, s := range spacing[1:] {
		if _, _, ok := rational(1 / s); !ok {
			return spacing, "", fmt.Errorf("tiff: write %s: spacing %g along %s has no TIFF resolution (1/spacing as a ratio of 32-bit integers)", path, s, [2]string{"H", "W"}[i])
		}
	}
	unit, err := imagejUnit(h.Unit)
	if err != nil {
		return spacing, "", fmt.Errorf("tiff: write %s: %w", path, err)
	}
	return spacing, imagejDescription(h.Shape[0], spacing[0], unit), nil
}

// writtenSpacing is the (D, H, W) voxel size a TIFF keeps of h: the norms
// of the affine's columns (x, y, z) — the voxel's size in the world,
// whatever its direction — or h.Spacing when the affine has a zero column
// (a header that states only its spacing).
func writtenSpacing(h volume.Header) [3]float64 {
	var s [3]float64
	for c := range 3 {
		a := h.Affine
		s[2-c] = math.Sqrt(a[0][c]*a[0][c] + a[1][c]*a[1][c] + a[2][c]*a[2][c])
		if s[2-c] == 0 {
			return h.Spacing
		}
	}
	return s
}

// imagejUnit spells a Header's unit as ImageJ's unit= does and as this
// package's reader (NormalizeUnit) reads back: "micron" for micrometres
// (ImageJ's own word; Fiji shows µm), SI symbols for nanometres,
// millimetres and centimetres, any other unit as the Header spells it.
// Characters beyond ASCII are escaped \uXXXX, as ImageJ writes them; a
// control character, which would break the description's lines, is an
// error.
func imagejUnit(u string) (string, error) {
	switch u {
	case "micrometer":
		return "micron", nil
	case "nanometer":
		return "nm", nil
	case "millimeter":
		return "mm", nil
	case "centimeter":
		return "cm", nil
	}
	var b strings.Builder
	for _, r := range u {
		switch {
		case r < 0x20 || r == 0x7f:
			return "", fmt.Errorf("unit %q: a control character in ImageJ's unit=", u)
		case r < 0x80:
			b.WriteRune(r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			return "", fmt.Errorf("unit %q: a character beyond ImageJ's \\uXXXX escapes", u)
		}
	}
	return b.String(), nil
}

// imagejDescription is the ImageDescription ImageJ writes for a stack of
// d slices with spacing z between planes in unit ("": none, unit=
// omitted). ImageJ= names the oldest ImageJ whose description this is, as
// tifffile writes it.
func imagejDescription(d int, z float64, unit string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ImageJ=1.11a\nimages=%d\nslices=%d\n", d, d)
	if unit != "" {
		fmt.Fprintf(&b, "unit=%s\n", unit)
	}
	fmt.Fprintf(&b, "spacing=%s\nloop=false\n", strconv.FormatFloat(z, 'g', -1, 64))
	return b.String()
}

// encodeLabels writes the TIFF of labels (shape (D, H, W)) to w, a
// BigTIFF when big.
func encodeLabels(w io.Writer, shape [3]int, spacing [3]float64, desc string, labels []uint8, big bool) error {
	d, h, wd := shape[0], shape[1], shape[2]
	rps := rowsPerStrip(wd, h)
	e := &tiffEncoder{w: w, big: big}
	xn, xd, _ := rational(1 / spacing[2]) // checked by labelsMeta
	yn, yd, _ := rational(1 / spacing[1])
	var z deflater
	plane := h * wd
	cur, err := z.page(labels[:plane], wd, h, rps)
	if err != nil {
		return err
	}
	pos := e.headerSize()
	ifdAt := align2(pos + uint64(len(cur.data)))
	if err := e.header(ifdAt); err != nil {
		return err
	}
	for p := range d {
		offs := make([]uint64, len(cur.counts))
		o := pos
		for i, c := range cur.counts {
			offs[i] = o
			o += c
		}
		if err := e.write(cur.data); err != nil {
			return err
		}
		if err := e.padTo(ifdAt); err != nil {
			return err
		}
		so, err := e.offsets(tStripOffsets, offs)
		if err != nil {
			return err
		}
		sc, err := e.offsets(tStripByteCounts, cur.counts)
		if err != nil {
			return err
		}
		fields := []field{
			longField(tNewSubfileType, 0),
			longField(tImageWidth, uint32(wd)),
			longField(tImageLength, uint32(h)),
			shortField(tBitsPerSample, 8),
			shortField(tCompression, 8), // Adobe deflate, tifffile's "zlib"
			shortField(tPhotometric, 1), // BlackIsZero
			so,
			shortField(tSamplesPerPixel, 1),
			longField(tRowsPerStrip, uint32(rps)),
			sc,
			rationalField(tXResolution, xn, xd),
			rationalField(tYResolution, yn, yd),
			shortField(tPlanarConfig, 1),
			shortField(tResolutionUnit, 1), // none: the unit is ImageJ's unit=
			shortField(tPredictor, 1),
			shortField(tSampleFormat, 1), // unsigned
		}
		if p == 0 {
			fields = append(fields, asciiField(tImageDesc, desc))
		}
		ifd, nextAt := e.ifd(ifdAt, fields)
		pos = ifdAt + uint64(len(ifd))
		if p+1 < d {
			// The next page's strips follow this IFD, and its IFD them.
			if cur, err = z.page(labels[(p+1)*plane:(p+2)*plane], wd, h, rps); err != nil {
				return err
			}
			ifdAt = align2(pos + uint64(len(cur.data)))
			if !e.big && ifdAt > classicLimit {
				return fmt.Errorf("internal: IFD %d at %d, past classic TIFF's 4 GiB", p+1, ifdAt)
			}
			e.setNext(ifd, nextAt, ifdAt)
		}
		if err := e.write(ifd); err != nil {
			return err
		}
	}
	return nil
}

func align2(x uint64) uint64 { return x + x&1 }
