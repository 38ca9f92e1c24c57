package metaimage

import (
	"bufio"
	"bytes"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/zlib"
	"github.com/voxtrain/voxtrain/internal/atomicfile"
	"github.com/voxtrain/voxtrain/volume"
)

// filePerm is the mode of the files WriteLabels writes, filtered by the
// umask as os.Create's is: predictions are data others open in viewers.
const filePerm = 0o666

// WriteLabels writes a label map (h.Shape's D·H·W class indices, x
// fastest) to path as a zlib-compressed MET_UCHAR MetaImage with the
// fields ITK writes (see labelHeader for the geometry and unit). A .mha
// holds header and data (ElementDataFile = LOCAL); a .mhd header names a
// data file STEM.zraw beside it. Each file replaces its name whole
// (internal/atomicfile); for a .mhd the data file is put in place first,
// so a new header never names data that is not there yet. h.Spacing is
// not written: the voxel size is the length of each affine column, which
// is how Open reads it back.
func WriteLabels(path string, h volume.Header, labels []uint8) error {
	if err := volume.CheckShape(h.Shape); err != nil {
		return fmt.Errorf("metaimage: write %s: %w", path, err)
	}
	if n := int64(h.Shape[0]) * int64(h.Shape[1]) * int64(h.Shape[2]); n != int64(len(labels)) {
		return fmt.Errorf("metaimage: write %s: %d labels for a %d×%d×%d grid", path, len(labels), h.Shape[0], h.Shape[1], h.Shape[2])
	}
	// Compressed first: the header states the stream's size
	// (CompressedDataSize), and label maps compress to a small fraction.
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	if _, err := zw.Write(labels); err != nil {
		return fmt.Errorf("metaimage: write %s: %w", path, err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("metaimage: write %s: %w", path, err)
	}
	dataFile := "LOCAL"
	if detached(path) {
		dataFile = dataFileName(path)
	}
	hdr, err := labelHeader(h, z.Len(), dataFile)
	if err != nil {
		return fmt.Errorf("metaimage: write %s: %w", path, err)
	}
	if dataFile != "LOCAL" {
		if err := writeAtomic(filepath.Join(filepath.Dir(path), dataFile), "", z.Bytes()); err != nil {
			return fmt.Errorf("metaimage: write %s: data file %s: %w", path, dataFile, err)
		}
		z.Reset() // the header's file holds no data
	}
	if err := writeAtomic(path, hdr, z.Bytes()); err != nil {
		return fmt.Errorf("metaimage: write %s: %w", path, err)
	}
	return nil
}

// detached reports whether path names a header with a separate data
// file (.mhd).
func detached(path string) bool {
	return strings.HasSuffix(strings.ToLower(path), ".mhd")
}

// dataFileName is the data file of the .mhd header path: its base name
// with .mhd replaced by .zraw, as ITK names compressed data.
func dataFileName(path string) string {
	base := filepath.Base(path)
	return base[:len(base)-len(".mhd")] + ".zraw"
}

// writeAtomic writes text and then data to path under a temporary name,
// and renames it into place. The caller names the file in errors.
func writeAtomic(path, text string, data []byte) error {
	f, err := atomicfile.CreateUmask(path, filePerm)
	if err != nil {
		return err
	}
	defer f.Close() // discards the temporary file unless committed
	bw := bufio.NewWriterSize(f, 256<<10)
	if _, err := bw.WriteString(text); err != nil {
		return err
	}
	if _, err := bw.Write(data); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return f.Commit()
}

// writtenFiles returns the files WriteLabels(path, …) creates: path, and
// for a .mhd header its data file beside it.
func writtenFiles(path string) []string {
	if !detached(path) {
		return []string{path}
	}
	return []string{path, filepath.Join(filepath.Dir(path), dataFileName(path))}
}
