package data

import (
	"fmt"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/preprocess"
	"github.com/voxtrain/voxtrain/volume"
)

// readBufs lets a worker decode cases without allocating per sample.
type readBufs struct {
	chans [][]float32 // one file's channels, views into the case's
}

// decodeCase reads case c's files into v, reusing v's buffers: image
// channels as stored (scaled, not normalised), the label as class indices.
// planes > 0 asks only for the first planes (D) of every channel and of
// the label; the other voxels of v are then left as they were. Files are
// opened through package volume, so any registered format serves.
func decodeCase(c Case, channels int, v *Volume, bufs *readBufs, planes int) error {
	var shape [3]int
	ch := 0
	for fi, path := range c.Images {
		// One open per file: the header decides how much to read.
		err := func() error {
			f, err := volume.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			h := f.Header()
			// The case is decoded whole: a volume too large for that (a
			// 10^10-voxel store listed as a case) is refused naming it.
			if err := volume.CheckInMemory(readBox(h.Shape, planes).Size(), h.Channels); err != nil {
				return fmt.Errorf("case %s: %s: %w", c.ID, path, err)
			}
			if fi == 0 {
				shape = h.Shape
				v.Shape, v.SourceShape, v.Spacing, v.Unit, v.Affine = h.Shape, h.Shape, h.Spacing, h.Unit, h.Affine
				v.Crop, v.ResampleOrder, v.chunk = volume.Box{}, "", [3]int{}
				if ck, ok := f.(volume.Chunked); ok {
					v.chunk = ck.ChunkShape()
				}
				nch := channels
				if nch == 0 {
					nch = h.Channels * len(c.Images)
				}
				if len(c.Images) > 1 && h.Channels != 1 {
					return fmt.Errorf("%s: a 4D image (%d volumes) in a case listed as one file per channel", path, h.Channels)
				}
				if nch != h.Channels*len(c.Images) {
					return fmt.Errorf("case %s: the files hold %d channels, the dataset declares %d", c.ID, h.Channels*len(c.Images), nch)
				}
				v.Image = resizeChannels(v.Image, nch, shape[0]*shape[1]*shape[2])
			} else if h.Shape != shape || h.Channels != 1 {
				return fmt.Errorf("%s: shape %v (%d channels) differs from the first channel's %v", path, h.Shape, h.Channels, shape)
			}
			box := readBox(shape, planes)
			bufs.chans = bufs.chans[:0]
			for i := 0; i < h.Channels; i++ {
				bufs.chans = append(bufs.chans, v.Image[ch+i][:box.Voxels()])
			}
			ch += h.Channels
			return f.ReadRegion(box, bufs.chans)
		}()
		if err != nil {
			return err
		}
	}
	v.FG = nil
	if c.Label == "" {
		v.Label = nil
		return nil
	}
	f, err := volume.Open(c.Label)
	if err != nil {
		return err
	}
	defer f.Close()
	if h := f.Header(); h.Shape != shape || h.Channels != 1 {
		return fmt.Errorf("%s: label shape %v (%d volumes) does not match the image's %v", c.Label, h.Shape, h.Channels, shape)
	}
	v.Label = grow(v.Label, shape[0]*shape[1]*shape[2])
	box := readBox(shape, planes)
	return f.ReadLabels(box, v.Label[:box.Voxels()])
}

// readBox is what decodeCase reads of a volume of shape: the first planes
// (all of them when planes is 0 or more than the volume has).
func readBox(shape [3]int, planes int) volume.Box {
	b := volume.Whole(shape)
	if planes > 0 && planes < shape[0] {
		b.Hi[0] = planes
	}
	return b
}

// ReadCase decodes case c's files and applies the same deterministic
// preprocessing (normalisation, foreground index) as training with data
// section cfg, without a loader: for prediction on files outside a dataset
// and for evaluation. channels is the expected channel count (0: whatever
// the files hold). ct normalisation needs its statistics in cfg (a run's
// config.yaml holds them; see Setup).
func ReadCase(cfg config.Data, c Case, channels int) (*Volume, error) {
	if cfg.NeedsCTStatistics() {
		return nil, errUnresolvedCT(cfg)
	}
	spec := preprocess.SpecOf(cfg)
	v, _, err := readCase(c, channels, &spec, nil, nil)
	return v, err
}

// readCase decodes and preprocesses case c whole, in nnU-Net's order:
// crop to the nonzero region (spec.Crop), normalise (within the nonzero
// mask for the channels that use it), resample to spec.Target when set,
// then index the label's foreground. When into is not nil its buffers are
// reused (and the result is into); src receives the case as decoded (nil:
// a new Volume). It returns the normalisation statistics used, per
// channel.
func readCase(c Case, channels int, spec *preprocess.Spec, into, src *Volume) (*Volume, []preprocess.CTStats, error) {
	v := into
	if v == nil {
		v = &Volume{}
	}
	dec := v
	if spec.Target != nil {
		if dec = src; dec == nil {
			dec = &Volume{}
		}
	}
	var bufs readBufs
	if err := decodeCase(c, channels, dec, &bufs, 0); err != nil {
		return nil, nil, err
	}
	mask := cropCase(spec, dec)
	st, err := caseStats(spec, c, dec, mask)
	if err != nil {
		return nil, nil, err
	}
	for i, im := range dec.Image {
		if err := spec.Normalize(i, im, st[i], mask); err != nil {
			return nil, nil, fmt.Errorf("case %s channel %d: %w", c.ID, i, err)
		}
	}
	if spec.Target != nil {
		// In the case's unit: prediction's input may be in another than
		// training's (data.spacing_unit), a training case is not.
		target, err := spec.TargetIn(dec.Unit, dec.Spacing)
		if err == nil {
			err = resampleCase(v, dec, *target, spec.Resample)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("case %s (%s): %w", c.ID, c.Images[0], err)
		}
	}
	if err := indexForeground(spec, c, v); err != nil {
		return nil, nil, err
	}
	return v, st, nil
}

// cropCase crops v, a case as decoded, to the bounding box of its nonzero
// mask when spec.Crop (v.Crop records the box, and v.Affine moves its
// origin to the box's first voxel), and returns the mask a z-score within
// the nonzero region takes its statistics from, on v's grid after the
// crop: nil when no channel uses one.
func cropCase(spec *preprocess.Spec, v *Volume) []uint8 {
	needMask := spec.NeedsMask(len(v.Image))
	if !spec.Crop && !needMask {
		return nil
	}
	nz := preprocess.NonzeroMask(v.Image, v.Shape)
	if spec.Crop {
		box := preprocess.MaskBox(nz, v.Shape)
		if box != volume.Whole(v.Shape) {
			// In place: every voxel moves to a lower index (copy is a memmove).
			for i, im := range v.Image {
				v.Image[i] = preprocess.CropInto(im, im, v.Shape, box)
			}
			if v.Label != nil {
				v.Label = preprocess.CropInto(v.Label, v.Label, v.Shape, box)
			}
			nz = preprocess.CropInto(nz, nz, v.Shape, box)
			v.Affine = shiftAffine(v.Affine, box.Lo)
			v.Shape = box.Size()
		}
		v.Crop = box
	}
	if !needMask {
		return nil
	}
	return preprocess.NormMask(nz, v.Label)
}

// shiftAffine moves the origin of the voxel-to-world matrix m to voxel lo
// (D, H, W = affine columns 2, 1, 0).
func shiftAffine(m volume.Affine, lo [3]int) volume.Affine {
	for a := range 3 {
		for row := range 3 {
			m[row][3] += m[row][2-a] * float64(lo[a])
		}
	}
	return m
}

// caseStats returns the normalisation parameters of every image channel
// of v, a whole decoded (and cropped) case, without changing v; mask is
// cropCase's. A large chunked case, neither cropped nor masked, takes
// them from the sampled fingerprint (fingerprintStats), read from memory
// here as the gz source reads it from the store, so training, validation
// and prediction normalise it alike.
func caseStats(spec *preprocess.Spec, c Case, v *Volume, mask []uint8) ([]preprocess.CTStats, error) {
	if mask == nil && !spec.Crop && len(statsBoxes(c.ID, v.Shape, v.chunk)) > 1 {
		return fingerprintStats(spec, c, v.Shape, v.chunk, len(v.Image), v.readBox)
	}
	st := make([]preprocess.CTStats, len(v.Image))
	for i, im := range v.Image {
		var err error
		if st[i], err = spec.Stats(i, im, mask); err != nil {
			return nil, fmt.Errorf("case %s channel %d: %w", c.ID, i, err)
		}
	}
	return st, nil
}

// indexForeground sets v.FG from v's label (none without one).
func indexForeground(spec *preprocess.Spec, c Case, v *Volume) error {
	v.FG = nil
	if v.Label == nil {
		return nil
	}
	fg, err := preprocess.BuildForegroundIndex(v.Label, v.Shape, spec.FGSamples)
	if err != nil {
		return fmt.Errorf("%s: %w", c.Label, err)
	}
	v.FG = fg
	return nil
}

func resizeChannels(img [][]float32, n, vox int) [][]float32 {
	if cap(img) < n {
		img = make([][]float32, n)
	}
	img = img[:n]
	for i := range img {
		img[i] = grow(img[i], vox)
	}
	return img
}

// grow returns b with length n, reusing its memory when large enough.
func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}
