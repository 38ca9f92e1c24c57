package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/infer"
	"github.com/voxtrain/voxtrain/internal/atomicfile"
	"github.com/voxtrain/voxtrain/preprocess"
	"github.com/voxtrain/voxtrain/volume"
	"github.com/voxtrain/voxtrain/zarr"
)

// Blockwise prediction: -o names an OME-Zarr store (OUT.ome.zarr, any
// name ending .zarr). The input (one volume file or store, or one file per
// channel) is read region by region, never whole; the labels (and the
// probabilities) are written block by block, each block one chunk, with a
// progress file that a rerun with --continue-prediction resumes from.

// progressFile is the name of the progress file inside the output store.
const progressFile = ".voxtrain_progress.json"

// blockProgress is the progress file: what the run predicts, with what,
// and the blocks written. A rerun with --continue-prediction must predict
// the same (everything but Done and Normalization is compared) and skips
// Done; Normalization is reused, so the rest of the blocks are normalised
// as the first were.
type blockProgress struct {
	Version       int           `json:"version"`
	Inputs        []string      `json:"inputs"`
	Checkpoints   []string      `json:"checkpoints"`
	ROI           [3][2]int     `json:"roi"` // [[z0, z1], [y0, y1], [x0, x1]], the input's voxels
	Block         [3]int        `json:"block"`
	Overlap       float64       `json:"overlap"`
	Mirror        bool          `json:"mirror"`
	Probabilities bool          `json:"probabilities"`
	Blocks        int           `json:"blocks"`
	Normalization []channelNorm `json:"normalization"`
	Done          []int         `json:"done"` // block numbers, z-major, ascending
}

// channelNorm is one input channel's normalisation: zscore with the ROI's
// mean and std, ct with the checkpoint's window and statistics, none.
type channelNorm struct {
	Scheme string      `json:"scheme"`
	Mean   float64     `json:"mean,omitempty"`
	Std    float64     `json:"std,omitempty"`
	Window *[2]float64 `json:"window,omitempty"`
}

func (n channelNorm) stats() preprocess.CTStats {
	st := preprocess.CTStats{Mean: n.Mean, Std: n.Std, Lower: math.Inf(-1), Upper: math.Inf(1)}
	if n.Window != nil {
		st.Lower, st.Upper = n.Window[0], n.Window[1]
	}
	return st
}

// sameRun reports how q differs from p in what is predicted ("" when not).
func (p *blockProgress) sameRun(q *blockProgress) string {
	a, b := *p, *q
	a.Done, b.Done, a.Normalization, b.Normalization = nil, nil, nil, nil
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) == string(jb) {
		return ""
	}
	return fmt.Sprintf("it predicted %s, this run %s", ja, jb)
}

// isStoreOutput reports whether -o names a Zarr store (blockwise
// prediction).
func isStoreOutput(output string) bool {
	return strings.HasSuffix(strings.ToLower(strings.TrimRight(output, `/\`)), ".zarr")
}

// parseROI reads --roi z0:z1,y0:y1,x0:x1 (an empty bound is the volume's
// edge; "" is the whole volume) into half-open ranges, -1 for an edge.
func parseROI(s string) ([3][2]int, error) {
	r := [3][2]int{{-1, -1}, {-1, -1}, {-1, -1}}
	if s == "" {
		return r, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) != 3 {
		return r, fmt.Errorf("--roi %q: want z0:z1,y0:y1,x0:x1 (voxels of the input, ends exclusive)", s)
	}
	for a, p := range parts {
		lo, hi, ok := strings.Cut(strings.TrimSpace(p), ":")
		if !ok {
			return r, fmt.Errorf("--roi %q: axis %d %q: want start:end", s, a, p)
		}
		for k, v := range []string{lo, hi} {
			if v == "" {
				continue
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return r, fmt.Errorf("--roi %q: axis %d bound %q: want a voxel index ≥ 0", s, a, v)
			}
			r[a][k] = n
		}
		if r[a][0] >= 0 && r[a][1] >= 0 && r[a][1] <= r[a][0] {
			return r, fmt.Errorf("--roi %q: axis %d is empty (%d:%d)", s, a, r[a][0], r[a][1])
		}
	}
	return r, nil
}

// resolveROI fills a parsed --roi's edges from shape and checks it.
func resolveROI(r [3][2]int, shape [3]int) (volume.Box, error) {
	var b volume.Box
	for a := range 3 {
		b.Lo[a], b.Hi[a] = max(r[a][0], 0), r[a][1]
		if b.Hi[a] < 0 {
			b.Hi[a] = shape[a]
		}
		if b.Hi[a] > shape[a] || b.Lo[a] >= b.Hi[a] {
			return b, fmt.Errorf("--roi: axis %d %d:%d outside the input's %d voxels (shape %v)", a, b.Lo[a], b.Hi[a], shape[a], shape)
		}
	}
	return b, nil
}

// parseBlock reads --block: one size for every axis or z,y,x.
func parseBlock(s string) ([3]int, error) {
	parts := strings.Split(s, ",")
	if len(parts) == 1 {
		parts = []string{parts[0], parts[0], parts[0]}
	}
	var b [3]int
	if len(parts) != 3 {
		return b, fmt.Errorf("--block %q: want one size or z,y,x", s)
	}
	for a, p := range parts {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 {
			return b, fmt.Errorf("--block %q: want sizes ≥ 1", s)
		}
		b[a] = n
	}
	return b, nil
}

// blockInputs are the open input files of a blockwise run: together they
// hold the model's channels on one grid.
type blockInputs struct {
	files    []volume.File
	paths    []string
	channels int
	hdr      volume.Header // the first file's
}

// openBlockInputs opens the input files; an OME-Zarr (or COSEM N5) image
// of several levels whose level 0 is not at data.target_spacing (d; its
// unit converted as checkBlockwiseSpec compares) is read at the level
// that is, when one is (levelAtTarget), which log reports.
func openBlockInputs(paths []string, d config.Data, log io.Writer) (*blockInputs, error) {
	in := &blockInputs{}
	for _, p := range paths {
		if !volume.Readable(p) {
			return nil, in.closeWith(fmt.Errorf("--input %s: not a volume file or store (formats: %v); a blockwise prediction reads one case", p, volume.Formats()))
		}
		if lp, l, ok := levelAtTarget(p, d); ok {
			fmt.Fprintf(log, "input %s: level %s (shape %v, voxel size %v%s), at the checkpoint's data.target_spacing; --roi is in its voxels\n", p, l.Path, l.Shape, l.Spacing, unitSuffix(l.Unit))
			p = lp
		}
		f, err := volume.Open(p)
		if err != nil {
			return nil, in.closeWith(fmt.Errorf("--input %w", err))
		}
		h := f.Header()
		if len(in.files) == 0 {
			in.hdr = h
		} else if h.Shape != in.hdr.Shape {
			f.Close()
			return nil, in.closeWith(fmt.Errorf("--input %s has shape %v, %s %v", p, h.Shape, in.paths[0], in.hdr.Shape))
		}
		in.files = append(in.files, f)
		in.paths = append(in.paths, p)
		in.channels += h.Channels
	}
	return in, nil
}

// levelAtTarget returns the path of the level of the multiscale image at
// p whose spacing is data.target_spacing (converted into the level's
// unit; within 1 %, as checkBlockwiseSpec compares), when p names such an
// image and its level 0 is not at that spacing; ok is false otherwise
// (no target, not an image of levels, no level at it: p is read as given
// and checkBlockwiseSpec says why it does not fit).
func levelAtTarget(p string, d config.Data) (path string, l zarr.Level, ok bool) {
	spec := preprocess.SpecOf(d)
	if spec.Target == nil {
		return "", l, false
	}
	ls, err := zarr.ImageLevels(p)
	if err != nil || len(ls) < 2 {
		return "", l, false
	}
	for k, lk := range ls {
		t, err := spec.TargetIn(lk.Unit, lk.Spacing)
		if err != nil {
			return "", l, false
		}
		if !spacingWithin(lk.Spacing, *t) {
			continue
		}
		if k == 0 {
			return "", l, false
		}
		return zarr.LevelPath(p, lk), lk, true
	}
	return "", l, false
}

// spacingWithin reports whether spacing is target's within 1 % on every
// axis: blocks are predicted on the input's grid, unresampled.
func spacingWithin(spacing, target [3]float64) bool {
	for a := range 3 {
		if math.Abs(spacing[a]-target[a]) > 0.01*target[a] {
			return false
		}
	}
	return true
}

func (in *blockInputs) closeWith(err error) error {
	for _, f := range in.files {
		f.Close()
	}
	return err
}

// read reads box (volume coordinates) of every channel into dst.
func (in *blockInputs) read(box volume.Box, dst [][]float32) error {
	c := 0
	for i, f := range in.files {
		n := f.Header().Channels
		if err := f.ReadRegion(box, dst[c:c+n]); err != nil {
			return fmt.Errorf("%s: %w", in.paths[i], err)
		}
		c += n
	}
	return nil
}

// zscoreStats returns the mean and population std of channel values over
// roi, reading it block by block (memory: one block), each block's sums in
// float64 merged by Chan et al.'s formula. They equal MeanStd over the ROI
// read whole up to the order of the float64 sums.
func zscoreStats(ctx context.Context, in *blockInputs, roi volume.Box, block [3]int, want []bool) ([][2]float64, error) {
	g, err := infer.NewBlockGrid(roi.Size(), block, [3]int{1, 1, 1}, 0)
	if err != nil {
		return nil, err
	}
	type acc struct{ n, mean, m2 float64 }
	accs := make([]acc, in.channels)
	for i := range g.NumBlocks() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b := g.Box(i)
		for a := range 3 {
			b.Lo[a] += roi.Lo[a]
			b.Hi[a] += roi.Lo[a]
		}
		dst := make([][]float32, in.channels)
		for c := range dst {
			if want[c] {
				dst[c] = make([]float32, b.Voxels())
			}
		}
		full := make([][]float32, in.channels)
		for c := range full {
			full[c] = dst[c]
			if full[c] == nil {
				full[c] = make([]float32, b.Voxels())
			}
		}
		if err := in.read(b, full); err != nil {
			return nil, err
		}
		for c, x := range dst {
			if x == nil {
				continue
			}
			var s float64
			for _, v := range x {
				s += float64(v)
			}
			n := float64(len(x))
			m := s / n
			var m2 float64
			for _, v := range x {
				d := float64(v) - m
				m2 += d * d
			}
			a := &accs[c]
			tot := a.n + n
			delta := m - a.mean
			a.mean += delta * n / tot
			a.m2 += m2 + delta*delta*a.n*n/tot
			a.n = tot
		}
	}
	out := make([][2]float64, in.channels)
	for c, a := range accs {
		if a.n > 0 {
			out[c] = [2]float64{a.mean, math.Sqrt(a.m2 / a.n)}
		}
	}
	return out, nil
}

// checkBlockwiseSpec refuses preprocessing that needs the whole case:
// cropping to the nonzero box and its mask, and resampling (the blocks are
// predicted on the input's grid, h, so its spacing must be the target's,
// compared in the input's unit: data.target_spacing is in
// data.spacing_unit when the checkpoint records it).
func checkBlockwiseSpec(d config.Data, h volume.Header) error {
	spec := preprocess.SpecOf(d)
	if spec.Crop || len(spec.MaskNorm) > 0 {
		return errors.New("blockwise prediction (-o *.zarr): the checkpoint's data.crop_to_nonzero or use_mask_for_norm needs the whole case at once; predict it as a NIfTI case instead")
	}
	t, err := spec.TargetIn(h.Unit, h.Spacing)
	if err != nil {
		return fmt.Errorf("blockwise prediction (-o *.zarr): the input in %s: %w", volume.UnitName(h.Unit), err)
	}
	if t == nil {
		return nil
	}
	if !spacingWithin(h.Spacing, *t) {
		target := fmt.Sprint(*spec.Target)
		if u := spec.TargetUnit; u != "" {
			target += " " + u
			if u != h.Unit && h.Unit != "" {
				target += fmt.Sprintf(" = %v %s", *t, h.Unit)
			}
		}
		return fmt.Errorf("blockwise prediction (-o *.zarr): the input's spacing %v%s is not the checkpoint's data.target_spacing %s, and blocks are not resampled: give the input at that spacing (an OME-Zarr level, or resample it)", h.Spacing, unitSuffix(h.Unit), target)
	}
	return nil
}

// unitSuffix is " unit" for a spacing in messages, "" when none is stated.
func unitSuffix(u string) string {
	if u == "" {
		return ""
	}
	return " " + u
}

// predictBlocksRun is predictRun for an OME-Zarr output: see the help.
func predictBlocksRun(ctx context.Context, opts *PredictOptions) error {
	out := opts.IO.Out
	if opts.Postprocessing != "" {
		return errors.New("--postprocessing needs the whole label map; it is not applied to a blockwise (-o *.zarr) prediction: run train postprocess on the result")
	}
	roiSpec, err := parseROI(opts.ROI)
	if err != nil {
		return err
	}
	for _, p := range opts.Inputs {
		// Before the checkpoints load (the inputs open after them: the
		// level read depends on the target spacing).
		if !volume.Readable(p) {
			return fmt.Errorf("--input %s: not a volume file or store (formats: %v); a blockwise prediction reads one case", p, volume.Formats())
		}
	}
	ens, done, err := opts.openEnsemble()
	if err != nil {
		return err
	}
	defer done()
	in, err := openBlockInputs(opts.Inputs, ens.Data, out)
	if err != nil {
		return err
	}
	defer in.closeWith(nil)
	roi, err := resolveROI(roiSpec, in.hdr.Shape)
	if err != nil {
		return err
	}
	store := strings.TrimRight(opts.Output, `/\`)
	progPath := filepath.Join(store, progressFile)
	var prev *blockProgress
	if ents, err := os.ReadDir(store); err == nil && len(ents) > 0 {
		_, perr := os.Stat(progPath)
		switch {
		case perr != nil:
			return fmt.Errorf("--output %s exists and was not written by train predict (no %s): remove it or name another store", store, progressFile)
		case opts.Continue:
			prev = &blockProgress{}
			b, err := os.ReadFile(progPath)
			if err == nil {
				err = json.Unmarshal(b, prev)
			}
			if err != nil {
				return fmt.Errorf("--continue-prediction: %s: %w", progPath, err)
			}
		default:
			// Overwritten, as predict overwrites label files.
			if err := os.RemoveAll(store); err != nil {
				return fmt.Errorf("--output: %w", err)
			}
		}
	}
	if err := os.MkdirAll(filepath.Dir(store), 0o755); err != nil {
		return fmt.Errorf("--output: %w", err)
	}
	if in.channels != ens.Channels {
		return fmt.Errorf("--input: %d channels, the model takes %d", in.channels, ens.Channels)
	}
	if err := checkBlockwiseSpec(ens.Data, in.hdr); err != nil {
		return err
	}
	vc := opts.Model.Window
	g, err := infer.NewBlockGrid(roi.Size(), opts.Block, [3]int{1, 1, 1}, 0) // the blocks; each member has its windows
	if err != nil {
		return err
	}
	prog := &blockProgress{Version: 1, ROI: [3][2]int{{roi.Lo[0], roi.Hi[0]}, {roi.Lo[1], roi.Hi[1]}, {roi.Lo[2], roi.Hi[2]}},
		Block: opts.Block, Overlap: vc.Overlap, Mirror: vc.Mirror, Probabilities: opts.SaveProbabilities, Blocks: g.NumBlocks()}
	for _, p := range in.paths {
		a, _ := filepath.Abs(p)
		prog.Inputs = append(prog.Inputs, a)
	}
	for _, m := range ens.Members {
		a, _ := filepath.Abs(m.Dir)
		prog.Checkpoints = append(prog.Checkpoints, a)
	}
	if prev != nil {
		if d := prev.sameRun(prog); d != "" {
			return fmt.Errorf("--continue-prediction: %s was written by another run (%s); remove it or drop --continue-prediction to overwrite it", store, d)
		}
		prog.Normalization, prog.Done = prev.Normalization, prev.Done
	}

	// Normalisation: ct and none need nothing of the volume; a z-score
	// needs the ROI's mean and std, which one streaming pass computes (and
	// the progress file keeps for a rerun).
	spec := preprocess.SpecOf(ens.Data)
	if prog.Normalization == nil {
		need := make([]bool, in.channels)
		anyZ := false
		for c := range need {
			need[c] = spec.Scheme(c) == "zscore"
			anyZ = anyZ || need[c]
		}
		var zs [][2]float64
		if anyZ {
			fmt.Fprintf(out, "z-score statistics: reading the ROI %v block by block\n", roi)
			if zs, err = zscoreStats(ctx, in, roi, opts.Block, need); err != nil {
				return fmt.Errorf("z-score statistics: %w", err)
			}
		}
		for c := range in.channels {
			n := channelNorm{Scheme: spec.Scheme(c)}
			switch n.Scheme {
			case "zscore":
				n.Mean, n.Std = zs[c][0], zs[c][1]
			case "ct":
				st, err := spec.Stats(c, nil, nil)
				if err != nil {
					return err
				}
				n.Mean, n.Std, n.Window = st.Mean, st.Std, &[2]float64{st.Lower, st.Upper}
			}
			prog.Normalization = append(prog.Normalization, n)
		}
	}
	if len(prog.Normalization) != in.channels {
		return fmt.Errorf("%s: %d channels' normalisation, the input has %d", progPath, len(prog.Normalization), in.channels)
	}
	read := func(box volume.Box, dst [][]float32) error {
		b := box
		for a := range 3 {
			b.Lo[a] += roi.Lo[a]
			b.Hi[a] += roi.Lo[a]
		}
		if err := in.read(b, dst); err != nil {
			return err
		}
		for c, n := range prog.Normalization {
			if n.Scheme == "none" {
				continue
			}
			if err := preprocess.CTNormalize(dst[c], n.stats()); err != nil {
				return err
			}
		}
		return nil
	}

	// The output images: labels at the store's root, probabilities in
	// its probabilities/ group; one chunk per block.
	spacing := in.hdr.Spacing
	var origin [3]float64
	A := in.hdr.Affine
	ijk := [3]float64{float64(roi.Lo[2]), float64(roi.Lo[1]), float64(roi.Lo[0])} // (x, y, z)
	for a := range 3 {
		row := 2 - a // world row of axis a (z is the third)
		origin[a] = A[row][0]*ijk[0] + A[row][1]*ijk[1] + A[row][2]*ijk[2] + A[row][3]
	}
	// In the input's unit: an OME-Zarr in nanometres gives labels in
	// nanometres, which a viewer overlays on it.
	labelSpec := zarr.ImageSpec{Name: "labels", Shape: roi.Size(), Chunks: opts.Block, DType: "uint8", Spacing: spacing, Origin: origin, Unit: in.hdr.Unit}
	probSpec := labelSpec
	probSpec.Name, probSpec.DType, probSpec.Channels = "probabilities", "float32", max(ens.Classes, 1)
	probDir := filepath.Join(store, "probabilities")
	open := zarr.CreateImage
	if prev != nil {
		open = zarr.OpenImage
	}
	labW, err := open(store, labelSpec)
	if err != nil {
		return fmt.Errorf("--output: %w", err)
	}
	var probW *zarr.ImageWriter
	if opts.SaveProbabilities {
		if probW, err = open(probDir, probSpec); err != nil {
			return fmt.Errorf("--output: %w", err)
		}
	}
	saveProgress := func() error {
		b, err := json.MarshalIndent(prog, "", "  ")
		if err != nil {
			return err
		}
		// Done lists only blocks whose chunks are durably in place.
		for _, w := range []*zarr.ImageWriter{labW, probW} {
			if w != nil {
				if err := w.Sync(); err != nil {
					return err
				}
			}
		}
		return atomicfile.WriteFileUmask(progPath, append(b, '\n'), 0o666)
	}
	if err := saveProgress(); err != nil {
		return err
	}

	bytes, err := ens.BlockBytes(roi.Size(), opts.Block, vc)
	if err != nil {
		return err
	}
	for _, m := range ens.Members {
		fmt.Fprintf(out, "checkpoint %s\n", m.Dir)
	}
	tta := "on (8 passes)"
	if !vc.Mirror {
		tta = "off"
	}
	fmt.Fprintf(out, "ROI %v of %v: %d blocks of %v, %d already written; mirroring %s; at most %.0f MiB a block\n",
		roi, in.hdr.Shape, g.NumBlocks(), opts.Block, len(prog.Done), tta, float64(bytes)/(1<<20))
	done0 := len(prog.Done)
	for i := range g.NumBlocks() {
		if _, ok := slices.BinarySearch(prog.Done, i); ok {
			continue
		}
		if err := ctx.Err(); err != nil {
			return blocksInterrupted(len(prog.Done), g.NumBlocks(), store, err)
		}
		start := time.Now()
		b := g.Box(i)
		probs, err := ens.BlockProbabilities(ctx, roi.Size(), opts.Block, b, vc, read)
		if err != nil {
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				return blocksInterrupted(len(prog.Done), g.NumBlocks(), store, err)
			}
			return fmt.Errorf("block %d %v: %w", i, b, err)
		}
		if err := labW.WriteBlock(b, ens.Labels(probs, b.Voxels())); err != nil {
			return err
		}
		if probW != nil {
			if err := probW.WriteBlock(b, probs[:probSpec.Channels*b.Voxels()]); err != nil {
				return err
			}
		}
		k, _ := slices.BinarySearch(prog.Done, i)
		prog.Done = slices.Insert(prog.Done, k, i)
		if err := saveProgress(); err != nil {
			return err
		}
		fmt.Fprintf(out, "block %d/%d %v: %.1fs\n", len(prog.Done), g.NumBlocks(), b, time.Since(start).Seconds())
	}
	if n := len(prog.Done) - done0; n < g.NumBlocks() {
		fmt.Fprintf(out, "--continue-prediction: %d of %d blocks already predicted, skipped\n", g.NumBlocks()-n, g.NumBlocks())
	}
	fmt.Fprintf(out, "wrote %s\n", store)
	return nil
}

// blocksInterrupted is the error of a run stopped between blocks.
func blocksInterrupted(done, total int, store string, err error) error {
	// Wrapped, so main still tells an interruption (exit 130).
	return fmt.Errorf("interrupted after %d of %d blocks, each written whole; %s is a valid store, its other blocks 0; --continue-prediction predicts the rest: %w",
		done, total, store, err)
}
