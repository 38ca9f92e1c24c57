package nifti

import (
	"fmt"
	"os"
	"strings"
)

// Paths returns the header and image file names of a NIfTI path: the same
// name for .nii and .nii.gz, and the .hdr/.img pair (with .gz where given)
// for either member of a pair.
func Paths(path string) (hdr, img string, err error) {
	lower := strings.ToLower(path)
	trim := func(suffix string) string { return path[:len(path)-len(suffix)] }
	switch {
	case strings.HasSuffix(lower, ".nii"), strings.HasSuffix(lower, ".nii.gz"):
		return path, path, nil
	case strings.HasSuffix(lower, ".hdr"):
		return path, pairPartner(trim(".hdr"), ".img"), nil
	case strings.HasSuffix(lower, ".hdr.gz"):
		return path, pairPartner(trim(".hdr.gz"), ".img"), nil
	case strings.HasSuffix(lower, ".img"):
		return pairPartner(trim(".img"), ".hdr"), path, nil
	case strings.HasSuffix(lower, ".img.gz"):
		return pairPartner(trim(".img.gz"), ".hdr"), path, nil
	}
	return "", "", fmt.Errorf("nifti: %s: unknown file extension (want .nii, .nii.gz, .hdr, .img, .hdr.gz or .img.gz)", path)
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
