package infer

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/voxtrain/voxtrain/internal/atomicfile"
	"github.com/voxtrain/voxtrain/internal/samepath"
	"github.com/voxtrain/voxtrain/nifti"
	"github.com/voxtrain/voxtrain/volume"
)

// CheckOutput checks, before any work goes into a prediction, that its
// label map can be written to output: a NIfTI name (.nii, .nii.gz or a
// .hdr/.img pair), none of the input files (a prediction must never
// overwrite the image it was made from), not a directory, and in a
// directory this process can write in (created when missing, as
// WriteLabels would). Errors start with output and say the problem.
func CheckOutput(output string, inputs []string) error {
	hdr, img, err := nifti.OutputPaths(output)
	if err != nil {
		return fmt.Errorf("%s: not a NIfTI file name (want .nii, .nii.gz, .hdr or .img, each optionally .gz)", output)
	}
	for _, in := range inputs {
		ih, ii, err := nifti.Paths(in)
		if err != nil {
			ih, ii = in, in // the input's own error comes when it is read
		}
		for _, o := range []string{hdr, img} {
			for _, i := range []string{in, ih, ii} {
				if samepath.Same(o, i) {
					return fmt.Errorf("%s: the same file as the input %s (the prediction would overwrite its image); give another name", output, i)
				}
			}
		}
	}
	for _, o := range []string{hdr, img} {
		if fi, err := os.Stat(o); err == nil && fi.IsDir() {
			return fmt.Errorf("%s: is a directory; give a file name such as %s", o, filepath.Join(o, "labels.nii.gz"))
		}
	}
	dir := filepath.Dir(output)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return fmt.Errorf("%s: %w", output, err)
	}
	// Creating (and discarding) the temporary file the write will use is
	// the one sure test that the directory takes it: permissions, ACLs, a
	// read-only mount.
	f, err := atomicfile.CreateUmask(hdr, 0o666)
	if err != nil {
		return fmt.Errorf("%s: cannot write in %s: %w", output, dir, err)
	}
	f.Close()
	return nil
}

// WriteLabels writes a label map on the grid of the reference image file
// as NIfTI: a NIfTI reference's header (dims, voxel size, qform, sform),
// or the geometry of a reference in another format (NRRD, MetaImage,
// TIFF: referenceHeader).
func WriteLabels(output, reference string, labels []uint8) error {
	ref, err := referenceHeader(reference)
	if err != nil {
		return err
	}
	h := *ref
	h.Extensions = nil
	h.Datatype = nifti.Uint8
	h.Bitpix = 8
	h.SclSlope, h.SclInter = 0, 0
	h.CalMin, h.CalMax = 0, 0
	h.IntentCode, h.IntentName = 1002, "" // NIFTI_INTENT_LABEL
	h.Descrip = "voxtrain prediction"
	if h.Dim[0] > 3 {
		h.Dim[0] = 3 // drop a channel axis
		for i := 4; i < 8; i++ {
			h.Dim[i] = 1
		}
	}
	if n := h.NumVoxels(); n != int64(len(labels)) {
		return fmt.Errorf("write %s: %d labels for the %d voxels of %s", output, len(labels), n, reference)
	}
	vals := make([]float32, len(labels))
	for i, l := range labels {
		vals[i] = float32(l)
	}
	if dir := filepath.Dir(output); dir != "" {
		if err := os.MkdirAll(dir, 0o777); err != nil { // the umask's permissions, as the file's
			return fmt.Errorf("write %s: %w", output, err)
		}
	}
	return nifti.WriteFloat32(output, &h, vals)
}

// referenceHeader is the NIfTI header labels on reference's grid take:
// reference's own when it is a NIfTI file; else one made from its
// geometry as package volume reads it (shape, voxel-to-world affine, RAS+
// as NIfTI's), as sform and qform, with its unit where NIfTI has one
// (metre, millimetre, micrometre; another stays unstated, the numbers as
// the file has them).
func referenceHeader(reference string) (*nifti.Header, error) {
	if _, _, err := nifti.Paths(reference); err == nil {
		return nifti.ReadHeader(reference)
	}
	f, err := volume.Open(reference)
	if err != nil {
		return nil, err
	}
	g := f.Header()
	f.Close()
	h, err := nifti.NewHeader([]int{g.Shape[2], g.Shape[1], g.Shape[0]}, nifti.Uint8)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", reference, err)
	}
	h.SetAffine(nifti.Matrix4(g.Affine), 2) // NIFTI_XFORM_ALIGNED_ANAT, as nibabel's default sform
	h.XYZTUnits = 0
	switch volume.NormalizeUnit(g.Unit) {
	case "meter":
		h.XYZTUnits = nifti.UnitsMeter
	case "millimeter":
		h.XYZTUnits = nifti.UnitsMM
	case "micrometer":
		h.XYZTUnits = nifti.UnitsMicron
	}
	return h, nil
}
