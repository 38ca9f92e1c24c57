package postprocess

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/voxtrain/voxtrain/evaluation"
	"github.com/voxtrain/voxtrain/internal/samepath"
	"github.com/voxtrain/voxtrain/nifti"
	"github.com/voxtrain/voxtrain/volume"
)

// WriteLike writes labels to out in the format of the label file in,
// with its geometry, as nnU-Net writes a post-processed segmentation with
// the properties of the one it read: a NIfTI in's header whole
// (datatype, scaling, geometry, extensions and description kept); in
// another format, its geometry g as volume reads it, through that
// format's writer (volume.WriteLabels).
func WriteLike(out, in string, g volume.Header, labels []uint8) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o777); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	if _, _, err := nifti.Paths(in); err != nil {
		g.Channels = 1
		return volume.WriteLabels(out, g, labels)
	}
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
		if err := WriteLike(dst, in, lf.Header, lf.Labels); err != nil {
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

// LabelFiles lists the label files of dir (evaluation.LabelNames: those
// ending in ending, "" any label file ending), sorted paths; none is an
// error naming dir.
func LabelFiles(dir, ending string) ([]string, error) {
	names, err := evaluation.LabelNames(dir, ending)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s: no label files", dir)
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = filepath.Join(dir, n)
	}
	return out, nil
}
