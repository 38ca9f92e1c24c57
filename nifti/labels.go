package nifti

import (
	"fmt"

	"github.com/voxtrain/voxtrain/volume"
)

// labelEndings are the endings of NIfTI files as a folder lists them, one
// per volume: a pair's .img goes with its .hdr.
var labelEndings = []string{".nii.gz", ".nii", ".hdr.gz", ".hdr"}

// WriteLabels writes labels (h.Shape's D·H·W class indices, x fastest)
// as a uint8 NIfTI label map (intent NIFTI_INTENT_LABEL) with h's
// geometry: the affine as sform and qform, the unit in xyzt_units where
// NIfTI has one (metre, millimetre, micrometre; another stays unstated,
// the numbers as h has them). It is the writer volume.WriteLabels uses
// for NIfTI names; a prediction on a NIfTI image copies that image's own
// header instead (package infer), keeping its codes and description.
func WriteLabels(path string, h volume.Header, labels []uint8) error {
	nh, err := headerFromGeometry(h)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return writeLabels(path, nh, labels)
}

// headerFromGeometry returns a uint8 NIfTI header for a volume of h's
// shape and geometry (see WriteLabels).
func headerFromGeometry(g volume.Header) (*Header, error) {
	h, err := NewHeader([]int{g.Shape[2], g.Shape[1], g.Shape[0]}, Uint8)
	if err != nil {
		return nil, err
	}
	h.SetAffine(Matrix4(g.Affine), 2) // NIFTI_XFORM_ALIGNED_ANAT, as nibabel's default sform
	h.XYZTUnits = 0
	switch volume.NormalizeUnit(g.Unit) {
	case "meter":
		h.XYZTUnits = UnitsMeter
	case "millimeter":
		h.XYZTUnits = UnitsMM
	case "micrometer":
		h.XYZTUnits = UnitsMicron
	}
	return h, nil
}

// WriteLabelsLike writes labels as a uint8 label map with ref's header:
// its dims (a channel axis dropped), voxel size, qform and sform; scaling,
// display range and extensions cleared, intent NIFTI_INTENT_LABEL.
func WriteLabelsLike(path string, ref *Header, labels []uint8) error {
	h := *ref
	h.Extensions = nil
	if h.Dim[0] > 3 {
		h.Dim[0] = 3 // drop a channel axis
		for i := 4; i < 8; i++ {
			h.Dim[i] = 1
		}
	}
	return writeLabels(path, &h, labels)
}

func writeLabels(path string, h *Header, labels []uint8) error {
	h.Datatype = Uint8
	h.Bitpix = 8
	h.SclSlope, h.SclInter = 0, 0
	h.CalMin, h.CalMax = 0, 0
	h.IntentCode, h.IntentName = 1002, "" // NIFTI_INTENT_LABEL
	h.Descrip = "voxtrain prediction"
	if n := h.NumVoxels(); n != int64(len(labels)) {
		return fmt.Errorf("write %s: %d labels for the %d voxels of dims %v", path, len(labels), n, h.Shape())
	}
	return WriteRaw(path, h, labels) // uint8 voxels are their bytes
}

// writtenFiles returns the files a write of path creates: path, or a
// .hdr/.img pair.
func writtenFiles(path string) []string {
	hdr, img, err := writePaths(path)
	if err != nil || hdr == img {
		return []string{path}
	}
	return []string{hdr, img}
}

// pairFile returns the other file of a .hdr/.img pair (none for .nii).
func pairFile(path string) []string {
	hdr, img, err := Paths(path)
	switch {
	case err != nil || hdr == img:
		return nil
	case path == hdr:
		return []string{img}
	}
	return []string{hdr}
}
