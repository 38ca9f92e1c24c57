package postprocess

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/voxtrain/voxtrain/evaluation"
	"github.com/voxtrain/voxtrain/internal/samepath"
	"github.com/voxtrain/voxtrain/nifti"
)

// WriteLike writes labels to out with the header of the NIfTI file in
// (datatype, scaling, geometry, extensions and description all kept), as
// nnU-Net writes a post-processed segmentation with the properties of the
// one it read.
func WriteLike(out, in string, labels []uint8) error {
	h, err := nifti.ReadHeader(in)
	if err != nil {
		return err
	}
	if n := h.NumVoxels(); n != int64(len(labels)) {
		return fmt.Errorf("write %s: %d labels for the %d voxels of %s", out, len(labels), n, in)
	}
	vals := make([]float32, len(labels))
	for i, l := range labels {
		vals[i] = float32(l)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o777); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return nifti.WriteFloat32(out, h, vals)
}

// ApplyFiles post-processes each file of inputs into outDir (same name),
// returning the files written. A line per file goes to log (nil: none).
func (p *Plan) ApplyFiles(inputs []string, outDir string, log io.Writer) ([]string, error) {
	var out []string
	for _, in := range inputs {
		if samepath.Same(filepath.Dir(in), outDir) {
			return out, fmt.Errorf("%s: the output folder is the input's; give another (inputs are never overwritten)", outDir)
		}
		lf, err := evaluation.ReadLabelFile(in)
		if err != nil {
			return out, err
		}
		before := countFg(lf.Labels)
		if err := p.Apply(lf.Labels, lf.Header.Shape); err != nil {
			return out, fmt.Errorf("%s: %w", in, err)
		}
		dst := filepath.Join(outDir, filepath.Base(in))
		if err := WriteLike(dst, in, lf.Labels); err != nil {
			return out, err
		}
		out = append(out, dst)
		if log != nil {
			fmt.Fprintf(log, "%s: %d foreground voxels removed\n", filepath.Base(in), before-countFg(lf.Labels))
		}
	}
	return out, nil
}

func countFg(l []uint8) int {
	n := 0
	for _, v := range l {
		if v != 0 {
			n++
		}
	}
	return n
}

// LabelFiles lists the files of dir ending in ending ("": .nii.gz, .nii,
// .hdr.gz or .hdr), sorted; none is an error naming dir.
func LabelFiles(dir, ending string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() {
			continue
		}
		ok := ending != "" && strings.HasSuffix(n, ending)
		if ending == "" {
			for _, x := range []string{".nii.gz", ".nii", ".hdr.gz", ".hdr"} {
				ok = ok || strings.HasSuffix(n, x)
			}
		}
		if ok {
			out = append(out, filepath.Join(dir, n))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no label files", dir)
	}
	sort.Strings(out)
	return out, nil
}
