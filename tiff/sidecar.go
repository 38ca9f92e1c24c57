package tiff

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// nnU-Net v2's Tiff3DIO ignores a TIFF's own metadata and keeps a case's
// voxel size in a JSON file beside it, {"spacing": [s0, s1, s2]}, in the
// axis order of the array tifffile returns (pages, rows, columns): our
// (D, H, W). For an image CASE_0000.tif it is CASE.json (the channel
// suffix dropped), for a label CASE.tif CASE.json, and nnU-Net's
// write_seg writes OUTSTEM.json beside each prediction.

// maxSidecar bounds the bytes of a JSON file read as a sidecar. nnU-Net's
// are a few dozen bytes; a larger JSON file beside a stack (a scroll
// volume's own metadata, say) is something else and is ignored rather
// than read whole.
const maxSidecar = 16 << 10

// sidecarPaths returns the JSON files that may hold tif's nnU-Net spacing,
// in the order they are tried: DIR/STEM.json, then, when STEM ends in an
// nnU-Net channel suffix (_ and 4 digits), DIR/STEM-without-it.json.
func sidecarPaths(tif string) []string {
	dir, base := filepath.Split(tif)
	stem := base
	l := strings.ToLower(base)
	for _, ext := range []string{".tif", ".tiff"} {
		if strings.HasSuffix(l, ext) {
			stem = base[:len(base)-len(ext)]
			break
		}
	}
	paths := []string{filepath.Join(dir, stem+".json")}
	if n := len(stem); n > 5 && stem[n-5] == '_' && allDigits(stem[n-4:]) {
		paths = append(paths, filepath.Join(dir, stem[:n-5]+".json"))
	}
	return paths
}

func allDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// nnUNetSpacing returns the (D, H, W) spacing of tif's nnU-Net sidecar
// and its path; ok is false when tif has none. A candidate that is
// missing, not a regular file, larger than maxSidecar, or JSON that is
// not an object with a "spacing" key is not a sidecar and is skipped.
// A candidate that is not JSON at all, or whose "spacing" is not three
// positive finite numbers, is an error naming it: nnU-Net would fail on
// it too, and guessing a voxel size instead would be silent.
func nnUNetSpacing(tif string) (spacing [3]float64, path string, ok bool, err error) {
	for _, p := range sidecarPaths(tif) {
		b, err := readSmall(p)
		if err != nil {
			return spacing, p, false, fmt.Errorf("tiff: %s: %s, taken for its nnU-Net spacing sidecar: %w", tif, p, err)
		}
		if b == nil {
			continue
		}
		if !json.Valid(b) {
			// Unmarshal's error says where the JSON breaks.
			var v any
			err := json.Unmarshal(b, &v)
			return spacing, p, false, fmt.Errorf("tiff: %s: %s, taken for its nnU-Net spacing sidecar, is not JSON: %v", tif, p, err)
		}
		var doc map[string]json.RawMessage
		if json.Unmarshal(b, &doc) != nil {
			continue // JSON, but not an object: not a sidecar
		}
		raw, has := doc["spacing"]
		if !has {
			continue
		}
		var s []float64
		if err := json.Unmarshal(raw, &s); err != nil || len(s) != 3 || !positiveFinite(s) {
			return spacing, p, false, fmt.Errorf("tiff: %s: nnU-Net spacing sidecar %s: \"spacing\" is %s, want 3 positive finite numbers (D, H, W)", tif, p, clip(string(raw), 80))
		}
		return [3]float64{s[0], s[1], s[2]}, p, true, nil
	}
	return spacing, "", false, nil
}

// readSmall reads p when it is a regular file of at most maxSidecar
// bytes; nil, nil when it is absent, not a regular file, or larger.
func readSmall(p string) ([]byte, error) {
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() > maxSidecar {
		return nil, nil
	}
	// Read through a limit: the file may have grown since Stat.
	b, err := io.ReadAll(io.LimitReader(f, maxSidecar+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxSidecar {
		return nil, nil
	}
	return b, nil
}

func positiveFinite(s []float64) bool {
	for _, x := range s {
		if !(x > 0) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

// clip shortens s for a message.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// applySidecar sets t's spacing from its nnU-Net sidecar, when it has
// one: the sidecar wins over the TIFF's ImageJ or OME metadata, as in
// nnU-Net, which reads only the sidecar. The affine becomes the diagonal
// of that spacing (origin 0). The sidecar states no unit: the unit is ""
// unless the TIFF's own metadata gives the same spacing (within 1e-6,
// ImageJ's resolution being a ratio of integers) in a unit, which then
// is the unit of the sidecar's numbers too — as for the files WriteLabels
// writes, whose ImageJ metadata and sidecar state the same voxel size.
func (t *File) applySidecar(path string) error {
	s, _, ok, err := nnUNetSpacing(path)
	if err != nil || !ok {
		return err
	}
	for i := range 3 {
		if math.Abs(t.hdr.Spacing[i]-s[i]) > 1e-6*s[i] {
			t.hdr.Unit = ""
		}
	}
	t.hdr.Spacing = s
	t.hdr.Affine = [4][4]float64{}
	for i := range 3 {
		t.hdr.Affine[2-i][2-i] = s[i]
	}
	t.hdr.Affine[3][3] = 1
	return nil
}

// existingSidecars returns the files among tif's sidecar candidates that
// exist: what reading tif may take its spacing from.
func existingSidecars(tif string) []string {
	var out []string
	for _, p := range sidecarPaths(tif) {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			out = append(out, p)
		}
	}
	return out
}
