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
// label map can be written to output: a name of a format voxtrain writes
// label maps in (NIfTI .nii, .nii.gz or a .hdr/.img pair; NRRD .nrrd,
// .nhdr; MetaImage .mha, .mhd; TIFF .tif, .tiff), none of whose files
// (volume.WrittenFiles: a detached data file, a sidecar) is one of the
// input files (a prediction must never overwrite the image it was made
// from), not a directory, and in a directory this process can write in
// (created when missing, as WriteLabels would). Errors start with output
// and say the problem.
func CheckOutput(output string, inputs []string) error {
	if !volume.Writes(output) {
		return fmt.Errorf("%s: not a label file name voxtrain writes (want .nii, .nii.gz, .hdr or .img, each optionally .gz; .nrrd, .nhdr, .mha, .mhd, .tif or .tiff)", output)
	}
	outs := volume.WrittenFiles(output)
	for _, in := range inputs {
		for _, i := range volume.ReadFiles(in) { // a .nhdr's data file, a .tif's spacing file too
			for _, o := range outs {
				if samepath.Same(o, i) {
					what := "its image"
					if i != in {
						what = "a file " + in + " is read from"
					}
					which := ""
					if o != output {
						which = " its " + filepath.Base(o) + " is"
					}
					return fmt.Errorf("%s:%s the same file as the input %s (the prediction would overwrite %s); give another name", output, which, i, what)
				}
			}
		}
	}
	for _, o := range outs {
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
	f, err := atomicfile.CreateUmask(outs[0], 0o666)
	if err != nil {
		return fmt.Errorf("%s: cannot write in %s: %w", output, dir, err)
	}
	f.Close()
	return nil
}

// WriteLabels writes a label map on the grid of the reference image file
// to output, in the format output's name says (CheckOutput). A NIfTI
// output of a NIfTI reference takes the reference's header (dims, voxel
// size, qform, sform: nifti.WriteLabelsLike); any other pair the
// reference's geometry as package volume reads it (shape, voxel-to-world
// affine, unit), written as output's format states geometry.
func WriteLabels(output, reference string, labels []uint8) error {
	if dir := filepath.Dir(output); dir != "" {
		if err := os.MkdirAll(dir, 0o777); err != nil { // the umask's permissions, as the file's
			return fmt.Errorf("write %s: %w", output, err)
		}
	}
	_, _, notNIfTIOut := nifti.OutputPaths(output)
	if _, _, err := nifti.Paths(reference); err == nil && notNIfTIOut == nil {
		ref, err := nifti.ReadHeader(reference)
		if err != nil {
			return err
		}
		return nifti.WriteLabelsLike(output, ref, labels)
	}
	f, err := volume.Open(reference)
	if err != nil {
		return err
	}
	g := f.Header()
	f.Close()
	g.Channels = 1
	if n := int64(g.Shape[0]) * int64(g.Shape[1]) * int64(g.Shape[2]); n != int64(len(labels)) {
		return fmt.Errorf("write %s: %d labels for the %d voxels of %s", output, len(labels), n, reference)
	}
	return volume.WriteLabels(output, g, labels)
}
