package nrrd

import (
	"bufio"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/voxtrain/voxtrain/internal/atomicfile"
	"github.com/voxtrain/voxtrain/volume"
)

// filePerm is the mode of the files WriteLabels writes, filtered by the
// umask as os.Create's is: predictions are data others open in viewers.
const filePerm = 0o666

// WriteLabels writes a label map (h.Shape's D·H·W class indices, x
// fastest) to path as a gzip-encoded uint8 NRRD, in the form ITK and
// Slicer write: space left-posterior-superior, the affine's columns as
// space directions, its translation as space origin, and space units
// when h.Unit is a length unit (volume.UnitMeters). A .nrrd file holds
// header and data; a .nhdr header names a data file STEM.raw.gz beside
// it. Each file replaces its name whole (internal/atomicfile); for a
// .nhdr the data file is put in place first, so a new header never
// names data that is not there yet. h.Spacing is not written: NRRD's
// voxel size is the length of each space direction, which is how Open
// reads it back, so the affine is the geometry written.
func WriteLabels(path string, h volume.Header, labels []uint8) error {
	if err := volume.CheckShape(h.Shape); err != nil {
		return fmt.Errorf("nrrd: write %s: %w", path, err)
	}
	if n := int64(h.Shape[0]) * int64(h.Shape[1]) * int64(h.Shape[2]); n != int64(len(labels)) {
		return fmt.Errorf("nrrd: write %s: %d labels for a %d×%d×%d grid", path, len(labels), h.Shape[0], h.Shape[1], h.Shape[2])
	}
	if !detached(path) {
		hdr, err := labelHeader(h, "")
		if err != nil {
			return fmt.Errorf("nrrd: write %s: %w", path, err)
		}
		// The blank line ends an attached header; the gzip stream follows.
		if err := writeAtomic(path, hdr+"\n", labels); err != nil {
			return fmt.Errorf("nrrd: write %s: %w", path, err)
		}
		return nil
	}
	dataName := dataFileName(path)
	hdr, err := labelHeader(h, dataName)
	if err != nil {
		return fmt.Errorf("nrrd: write %s: %w", path, err)
	}
	if err := writeAtomic(filepath.Join(filepath.Dir(path), dataName), "", labels); err != nil {
		return fmt.Errorf("nrrd: write %s: data file %s: %w", path, dataName, err)
	}
	if err := writeAtomic(path, hdr, nil); err != nil {
		return fmt.Errorf("nrrd: write %s: %w", path, err)
	}
	return nil
}

// detached reports whether path names a detached header (.nhdr).
func detached(path string) bool {
	return strings.HasSuffix(strings.ToLower(path), ".nhdr")
}

// dataFileName is the data file of the detached header path: its base
// name with .nhdr replaced by .raw.gz, as ITK names it.
func dataFileName(path string) string {
	base := filepath.Base(path)
	return base[:len(base)-len(".nhdr")] + ".raw.gz"
}

// writeAtomic writes text and then, when labels is not nil, labels as a
// gzip stream to path under a temporary name, and renames it into place.
// The caller names the file in errors.
func writeAtomic(path, text string, labels []uint8) error {
	f, err := atomicfile.CreateUmask(path, filePerm)
	if err != nil {
		return err
	}
	defer f.Close() // discards the temporary file unless committed
	if err := encode(f, text, labels); err != nil {
		return err
	}
	return f.Commit()
}

// encode writes text, then labels gzip-compressed (nothing when labels
// is nil: a detached header), through a write buffer.
func encode(w io.Writer, text string, labels []uint8) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	if _, err := bw.WriteString(text); err != nil {
		return err
	}
	if labels != nil {
		gz := gzip.NewWriter(bw)
		if _, err := gz.Write(labels); err != nil {
			return err
		}
		if err := gz.Close(); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// writtenFiles returns the files WriteLabels(path, …) creates: path, and
// for a .nhdr header its data file beside it.
func writtenFiles(path string) []string {
	if !detached(path) {
		return []string{path}
	}
	return []string{path, filepath.Join(filepath.Dir(path), dataFileName(path))}
}
