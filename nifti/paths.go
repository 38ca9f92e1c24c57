package nifti

import (
	"fmt"
	"os"
	"strings"
)

// extensions are the NIfTI file name endings, lower case: a single file,
// or either member of a .hdr/.img pair, each optionally gzipped.
var extensions = []string{".nii", ".nii.gz", ".hdr", ".hdr.gz", ".img", ".img.gz"}

// unknownExtension ends the error for a name with none of the extensions.
const unknownExtension = "unknown file extension (want .nii, .nii.gz, .hdr, .img, .hdr.gz or .img.gz)"

// splitExt splits path into what precedes its NIfTI extension and the
// extension, lower case; ok is false when it has none.
func splitExt(path string) (base, ext string, ok bool) {
	lower := strings.ToLower(path)
	for _, e := range extensions {
		if strings.HasSuffix(lower, e) {
			return path[:len(path)-len(e)], e, true
		}
	}
	return "", "", false
}

// Paths returns the header and image file names of a NIfTI path: the same
// name for .nii and .nii.gz, and the .hdr/.img pair (with .gz where given)
// for either member of a pair.
func Paths(path string) (hdr, img string, err error) {
	base, ext, ok := splitExt(path)
	switch {
	case !ok:
		return "", "", fmt.Errorf("nifti: %s: %s", path, unknownExtension)
	case ext == ".nii" || ext == ".nii.gz":
		return path, path, nil
	case ext == ".hdr" || ext == ".hdr.gz":
		return path, pairPartner(base, ".img"), nil
	default: // .img, .img.gz
		return pairPartner(base, ".hdr"), path, nil
	}
}

// pairPartner finds the other member of a pair: base+ext, else base+ext+".gz"
// (either may exist); when neither exists it returns base+ext so the error
// names the expected file.
func pairPartner(base, ext string) string {
	for _, cand := range []string{base + ext, base + ext + ".gz"} {
		if _, err := os.Stat(cand); err == nil {
			return cand
		}
	}
	return base + ext
}

// OutputPaths returns the files that writing path (WriteFloat32, WriteRaw)
// makes: path itself for .nii and .nii.gz, both members of a pair for
// either one (compressed as the named one is). It is an error naming path
// when path has no NIfTI extension, so a caller can check a name before
// any work goes into what it will hold.
func OutputPaths(path string) (hdr, img string, err error) { return writePaths(path) }

// writePaths returns the header and image file names to write: for a pair,
// the other member is compressed as the named one is.
func writePaths(path string) (hdr, img string, err error) {
	base, ext, ok := splitExt(path)
	gz := ""
	if strings.HasSuffix(ext, ".gz") {
		gz = ".gz"
	}
	switch {
	case !ok:
		return "", "", fmt.Errorf("nifti: write %s: %s", path, unknownExtension)
	case ext == ".nii" || ext == ".nii.gz":
		return path, path, nil
	case ext == ".hdr" || ext == ".hdr.gz":
		return path, base + ".img" + gz, nil
	default: // .img, .img.gz
		return base + ".hdr" + gz, path, nil
	}
}
