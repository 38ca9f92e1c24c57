package data

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"

	"go.yaml.in/yaml/v3"

	"github.com/voxtrain/voxtrain/volume"
	"github.com/voxtrain/voxtrain/zarr"
)

// A dataset manifest describes large volumes annotated only in crops, as
// cellmap's EM datasets and Vesuvius' label cubes are: each raw volume is
// listed once with the label crops placed inside it. Every crop becomes a
// case whose image is the window of the raw volume under the crop
// (volume.WindowPath: a Zarr/N5 raw is read chunk by chunk, only where a
// patch falls) and whose label is the crop's file, so folds, the sampler,
// the voxel sources and their determinism treat crops as any other case.
//
//	classes: {background: 0, mito: 1, er: 2}  # label values, as nnU-Net v2's labels
//	class_weighting: true                     # default: cellmap's per-crop class weights
//	spacing: [8, 8, 8]                        # optional: the raw level every crop is on
//	volumes:
//	  - raw: jrc_hela-2.zarr/em                # relative to the manifest's folder; an
//	                                           # image group (levels s0, s1, …) or an array
//	    crops:
//	      - id: crop1                          # default: the label's file name
//	        label: crops/crop1.zarr
//	        offset: [100, 200, 300]            # (z, y, x) voxels of the raw; or
//	      - label: crops/crop2.zarr
//	        translation: [840.0, 1600, 96]     # (z, y, x) in the raw's units; or neither:
//	      - label: crops/crop3.zarr            # the label file's own origin (OME-NGFF)
//	        weight: 2                          # replaces the computed weight
//	        mask: crops/crop3_mask.zarr        # where the labels are valid (see below)
//
// With model.targets multi_label (sigmoid outputs, classes that may
// overlap) classes number the output channels, {mito: 0, mito_membrane:
// 1, er: 2}, and each crop gives one binary array per class instead of
// label, as cellmap's crops are stored:
//
//	      - id: crop1                          # default: the arrays' folder
//	        labels: {mito: crop1/mito.zarr, er: crop1/er.zarr}
//
// Its case's label is their bit-packed bytes (volume.PackedPath: bit c
// where class c's array is non-zero), and the class weights count a voxel
// in every class it belongs to. A class a crop does not list reads as
// absent everywhere in it by default; EM crops annotate different subsets
// of the classes, and training an unannotated class as absent teaches
// false negatives, so
//
//	unlisted_classes: unknown                 # default: absent
//
// makes it unknown in that crop instead, as cellmap-data does (its
// target is NaN there): the case's Case.Unknown has its bit, the loss
// leaves that class out of the crop's patches (no BCE term, no Dice
// sum, zero gradient) and validation scores it NaN for that case, left
// out of the mean. Either way a class counts towards the class weights
// only in the crops that list it (an unlisted class has no voxels).
//
// A crop's mask (any format, one channel of the label's shape and
// spacing) marks where its labels hold: every label voxel where the mask
// is 0 reads as loss.ignore_label, which the losses and metrics leave out
// and the class weights do not count. The case's label is then the path
// volume.MaskedPath names, so every reader of case files sees the masked
// labels; a manifest with masks needs loss.ignore_label set.
//
// Crops may be at another resolution than the raw, as cellmap's are (raw
// at 8 nm, crops at 4, 8 or 16 nm). When raw names a multiscale image's
// group (OME-Zarr's, or an N5 group with COSEM multiscales as
// OpenOrganelle publishes, jrc_hela-2.n5/em/fibsem-uint8), each crop is
// on the level whose spacing is the label's (within 0.1%): its image is
// that level's window, read as it is, so the crops of one raw may be on
// different levels. A crop no level matches,
// or any crop of a raw that is an array (a level named by path, a NIfTI
// file), has its label (and mask) read on the raw's grid (level 0 of a
// group) by nearest neighbour, positions being voxel centres as OME-NGFF
// and NIfTI put them (ties to the larger index, as cellmap-data's
// xarray reads): the case's label is volume.ResampledPath of the label,
// read lazily region by region, and its box is the raw voxels the crop
// covers wholly (rounded inward, so that no raw voxel takes a label from
// outside the crop). Such a crop is placed by translation or its own
// origin (an offset counts raw voxels and needs the label on the raw's
// grid); class counts and weights are the resampled labels'. Overlaps
// are found between crops on the same level only.
//
// The top-level spacing, when set, puts every crop on the raw at that
// spacing instead, the labels at other spacings resampled onto it as
// above. A level at it (within 0.1%), or a raw array at it, is read as it
// is. Otherwise the raw is read at it by trilinear interpolation (labels
// stay nearest neighbour, as here), so that any resolution can be trained
// at, as with cellmap-data — which picks the level the same way but reads
// axis-aligned arrays by nearest neighbour; voxtrain interpolates raw
// intensities, as nnU-Net resamples images by interpolation and labels by
// nearest, so a non-integer scale does not duplicate and drop voxels:
// 6 or 12 nm on a pyramid of 4, 8 and 16 nm levels, or 16 nm on an 8 nm
// array. The level read is the one cellmap-data's find_level picks (see
// targetGrid: the coarsest no coarser than the spacing on any axis,
// else the finest), and the raw the crops are windows of is that level
// interpolated onto a grid at the spacing (volume.ResampledPath with
// Linear, "LEVEL#resample=…&interp=linear"): positions are voxel centres
// (OME-NGFF's scale and translation, COSEM's transform), the grid's first
// voxel starts at the level's first voxel's face and it covers the
// level's extent with whole voxels (see resampledGrid), a voxel whose
// centre lies past the level's first or last voxel centre reads that
// voxel (clamped). It is read lazily as a level is: a patch decodes only
// the level's chunks under it, with one voxel of margin. A spacing the
// raw cannot be read at (not > 0, longer than the raw on an axis, a raw
// whose affine is not axis-aligned) is an error naming the manifest, the
// raw and spacing.
//
// Units: each file's header states the unit of its spacing and origin
// where its format says (volume.Header.Unit: OME-NGFF's axes "unit", N5's
// COSEM transform units or units, NIfTI's xyzt_units, NRRD's space
// units, ImageJ's and OME-TIFF's), and a crop is placed and resampled in the raw's unit: a label (and its
// mask) in micrometres on a raw in nanometres has its spacing and origin
// multiplied by 1000 first, so it lands on the voxels the same crop
// written in nanometres would, and is on the raw's 8 nm level when it is
// at 0.008 µm. The manifest's own spacing and translation are in the
// raw's unit. A unit that is not a length (a typo, "second") is an error
// naming the file and the unit. When the raw or the crop states no unit
// (a MetaImage, a plain TIFF, a NIfTI file whose xyzt_units is 0, an
// OME-Zarr without "unit"), the crop's numbers are taken to be in the
// raw's unit, as they were before units were read, with no warning: such
// a format cannot state a unit, a crop exported into it from a cellmap
// store carries the raw's numbers (as cellmap's own tools write them),
// and refusing it would leave no way to use it — the manifest has no key
// to declare a unit. A crop misplaced by a unit it does not state shows
// as a crop outside the raw or covering no whole voxel of it, errors that
// print both spacings with their units.

// manifest is the YAML document.
type manifest struct {
	Classes         map[string]int   `yaml:"classes"`
	ClassWeighting  *bool            `yaml:"class_weighting"`
	UnlistedClasses string           `yaml:"unlisted_classes"`
	Spacing         []float64        `yaml:"spacing"`
	Volumes         []manifestVolume `yaml:"volumes"`
}

type manifestVolume struct {
	Raw   string         `yaml:"raw"`
	Crops []manifestCrop `yaml:"crops"`
}

type manifestCrop struct {
	ID          string            `yaml:"id"`
	Label       string            `yaml:"label"`
	Labels      map[string]string `yaml:"labels"`
	Offset      []int             `yaml:"offset"`
	Translation []float64         `yaml:"translation"`
	Mask        string            `yaml:"mask"`
	Weight      *float64          `yaml:"weight"`
}

// placedCrop is a crop found inside its raw volume.
type placedCrop struct {
	where  string // "volumes[i].crops[j] (id)" for messages
	raw    string // the raw's array the box is in (a level of an image group)
	box    volume.Box
	counts []int64 // voxels per label value, counts[v] for v in 0..255
}

// rawGrid is a raw volume's array a crop's box is on: the raw as given,
// one level of its multiscale image group, or the raw interpolated onto
// the manifest's spacing (resampledGrid).
type rawGrid struct {
	path string // what the crops' windows open
	name string // for messages: path, or what the interpolated grid reads
	hdr  volume.Header
}

// rawVolume is a manifest's raw volume: the raw as given, its image
// group's levels (none for an array) with their headers, the manifest's
// target spacing (nil: none) and the grid at it, once found.
type rawVolume struct {
	path    string
	hdr     volume.Header
	levels  []zarr.Level
	spacing []float64
	target  *rawGrid
}

// level is level k's grid (k < 0: the raw as given), with the header
// zarr.ImageLevels read when it listed the levels.
func (rv *rawVolume) level(k int) (rawGrid, error) {
	if k < 0 || len(rv.levels) == 0 {
		return rawGrid{path: rv.path, name: rv.path, hdr: rv.hdr}, nil
	}
	p := rv.path
	// Level 0 keeps the raw's own path: it is what the raw opens as.
	if k > 0 {
		p = zarr.LevelPath(p, rv.levels[k])
	}
	return rawGrid{path: p, name: p, hdr: rv.levels[k].Header}, nil
}

// grid chooses the raw array a crop at spacing sp is placed on: the raw
// at the manifest's spacing when it sets one (targetGrid), else the level
// at sp, else the raw as given (level 0 of an image group), onto which
// the crop's labels are then resampled.
func (rv *rawVolume) grid(sp [3]float64) (rawGrid, error) {
	if rv.spacing != nil {
		return rv.targetGrid()
	}
	if k, ok := rv.levelAt(sp); ok {
		return rv.level(k)
	}
	return rv.level(-1)
}

// levelAt returns the level at spacing sp (-1: the raw as given, when it
// has no levels and is at sp); false when there is none.
func (rv *rawVolume) levelAt(sp [3]float64) (int, bool) {
	for k, l := range rv.levels {
		if sameSpacings(l.Spacing, sp) {
			return k, true
		}
	}
	return -1, len(rv.levels) == 0 && sameSpacings(rv.hdr.Spacing, sp)
}

// targetGrid is the raw at the manifest's spacing: its level there (or
// the raw as given, when that is its spacing), read as it is; else the
// raw interpolated onto a grid at that spacing from the level chosen
// below (resampledGrid).
func (rv *rawVolume) targetGrid() (rawGrid, error) {
	if rv.target != nil {
		return *rv.target, nil
	}
	var want [3]float64
	copy(want[:], rv.spacing)
	g, err := func() (rawGrid, error) {
		if k, ok := rv.levelAt(want); ok {
			return rv.level(k)
		}
		if len(rv.levels) == 0 {
			return rv.resampledGrid(-1, want)
		}
		// The level cellmap-data's CellMapImage.find_level reads at a
		// target scale (janelia-cellmap/cellmap-data,
		// src/cellmap_data/image.py: finest first, the last level before
		// the first coarser than the target on some axis), which is
		// zarr.ChooseLevel's: the coarsest no coarser than the target on
		// any axis (4/8/16 nm levels: 4 for 6 nm, 8 for 12, 16 for 20),
		// else the finest (2 nm: upsampled from 4). It reads the fewest
		// voxels, and its own downsampling (each level averages the one
		// below) has smoothed what a trilinear read of a much finer level
		// would alias.
		return rv.resampledGrid(zarr.ChooseLevel(rv.levels, want), want)
	}()
	if err != nil {
		return rawGrid{}, err
	}
	rv.target = &g
	return g, nil
}

// resampledGrid is the raw read at spacing t by trilinear interpolation
// of its level k (k < 0: the raw as given), clamped at the level's
// edges: a virtual volume (volume.ResampledPath with Linear) that the
// crops' windows read as they read a level, lazily, a box decoding only
// the level's voxels around it.
//
// Its grid covers the level's extent. Positions are voxel centres, as
// OME-NGFF's scale and translation (and COSEM's transform) put them: the
// level's voxel j on an axis is centred at o + j·s and spans o + (j ±
// ½)·s, so its n voxels span o − s/2 to o + (n − ½)·s. The grid's first
// voxel starts at that first face (its centre at o − s/2 + t/2) and it
// has ⌊n·s/t⌋ voxels, all wholly inside the extent (a part-voxel at the
// far face is left out, as coveredBox leaves out raw voxels a crop covers
// in part). That is where an OME-NGFF pyramid puts a level at spacing t
// (a coarser level's translation is the finer's plus (t − s)/2): a crop
// placed on such a level's voxels lands on the grid's.
func (rv *rawVolume) resampledGrid(k int, t [3]float64) (rawGrid, error) {
	src, err := rv.level(k)
	if err != nil {
		return rawGrid{}, err
	}
	h := src.hdr
	fail := func(format string, args ...any) (rawGrid, error) {
		return rawGrid{}, fmt.Errorf("spacing %v: the raw %s has no level at it, and %s (spacing %v%s) cannot be interpolated onto it: %s", t, rv.path, src.path, h.Spacing, unitSuffix(h.Unit), fmt.Sprintf(format, args...))
	}
	if err := axisAligned(h.Affine); err != nil {
		return fail("its %v", err)
	}
	o := origin(h.Affine)
	r := volume.Resampling{Spacing: t, At: o, Linear: true}
	for a := range 3 {
		if step := h.Affine[2-a][2-a]; step <= 0 {
			return fail("its axis %d runs backwards (affine step %g)", a, step)
		}
		s := h.Spacing[a]
		n := math.Floor(float64(h.Shape[a])*s/t[a] + 1e-6)
		if n < 1 {
			return fail("axis %d is %g long (%d voxels of %g), less than one voxel at %g", a, float64(h.Shape[a])*s, h.Shape[a], s, t[a])
		}
		r.Shape[a] = int(n)
		r.Origin[a] = o[a] - s/2 + t[a]/2
	}
	p := volume.ResampledPath(src.path, r)
	vh, err := header(p)
	if err != nil {
		return fail("%v", err)
	}
	return rawGrid{path: p, name: fmt.Sprintf("%s interpolated to spacing %v%s", src.path, t, unitSuffix(h.Unit)), hdr: vh}, nil
}

// loadManifest reads a manifest and builds its dataset: one case per crop,
// checked against its raw volume (inside it, on the level at its spacing
// or resampled onto the raw's grid).
// ignore is loss.ignore_label (0: none), the value masked-out voxels read
// as.
//
// multi is model.targets multi_label: each crop then gives one binary
// array per class in labels, packed into bit-packed bytes (bit c: the
// class classes names c), and classes numbers channels 0..6.
func loadManifest(path string, ignore int, multi bool) (*Dataset, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("data.manifest: %w", err)
	}
	var m manifest
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&m); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("data.manifest %s: %w", path, err)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("data.manifest %s: %s", path, fmt.Sprintf(format, args...))
	}
	if len(m.Volumes) == 0 {
		return nil, bad("no volumes")
	}
	root := filepath.Dir(path)
	ds := &Dataset{Root: root, Format: "manifest", Channels: 0}
	unknown := false
	switch m.UnlistedClasses {
	case "", "absent":
	case "unknown":
		if !multi {
			return nil, bad("unlisted_classes: unknown applies to per-class labels (model.targets multi_label, each crop's labels: {class: array}); a label map annotates every class")
		}
		unknown = true
	default:
		return nil, bad("unlisted_classes: %q, want absent (a class a crop does not list is absent there; the default) or unknown (left out of that crop's loss and scores)", m.UnlistedClasses)
	}
	if multi {
		// Bit c is channel c: the classes must number 0..K−1 with K ≤ 7.
		if len(m.Classes) == 0 {
			return nil, bad("classes: missing; model.targets multi_label needs every class named with its output channel, {mito: 0, er: 1, …}")
		}
		ds.MultiLabelNames = make([]string, len(m.Classes))
		for name, v := range m.Classes {
			if v < 0 || v >= len(m.Classes) || v >= volume.MaxBitClasses {
				return nil, bad("classes: %s is %d; with model.targets multi_label the %d classes are output channels 0..%d (at most %d)", name, v, len(m.Classes), len(m.Classes)-1, volume.MaxBitClasses)
			}
			if other := ds.MultiLabelNames[v]; other != "" {
				return nil, bad("classes: %s and %s are both %d", other, name, v)
			}
			ds.MultiLabelNames[v] = name
		}
	} else if len(m.Classes) > 0 {
		ds.LabelNames = map[int]string{}
		for name, v := range m.Classes {
			if v < 0 || v > 255 {
				return nil, bad("classes: %s is %d, want a label value in 0..255", name, v)
			}
			if other, dup := ds.LabelNames[v]; dup {
				return nil, bad("classes: %s and %s are both %d", other, name, v)
			}
			ds.LabelNames[v] = name
		}
	}
	if m.Spacing != nil {
		if len(m.Spacing) != 3 {
			return nil, bad("spacing %v: want [z, y, x] in the raw's units", m.Spacing)
		}
		for _, v := range m.Spacing {
			if !(v > 0) || math.IsInf(v, 0) {
				return nil, bad("spacing %v: want finite spacings > 0", m.Spacing)
			}
		}
	}
	var crops []placedCrop
	for i, vol := range m.Volumes {
		if vol.Raw == "" {
			return nil, bad("volumes[%d].raw: missing", i)
		}
		raw := resolve(root, vol.Raw)
		rh, err := header(raw)
		if err != nil {
			return nil, bad("volumes[%d].raw: %v", i, err)
		}
		if _, err := volume.UnitScale(rh.Unit, ""); err != nil {
			return nil, bad("volumes[%d].raw %s: %v", i, raw, err)
		}
		rv := &rawVolume{path: raw, hdr: rh, spacing: m.Spacing}
		if volume.FormatName(raw) == "zarr" {
			if rv.levels, err = zarr.ImageLevels(raw); err != nil {
				return nil, bad("volumes[%d].raw: %v", i, err)
			}
		}
		if rv.spacing != nil {
			// Found once per raw, before its crops: a spacing the raw
			// cannot be read at is the raw's error, not a crop's.
			if _, err := rv.targetGrid(); err != nil {
				return nil, bad("volumes[%d].raw: %v", i, err)
			}
		}
		if len(vol.Crops) == 0 {
			return nil, bad("volumes[%d] (%s): no crops", i, raw)
		}
		for j, c := range vol.Crops {
			pc, cs, err := placeCrop(root, rv, c, ignore, m.Classes, multi)
			if err != nil {
				if id := cmp.Or(c.ID, stripExt(filepath.Base(c.Label))); c.ID != "" || c.Label != "" {
					return nil, bad("volumes[%d].crops[%d] (%s): %v", i, j, id, err)
				}
				return nil, bad("volumes[%d].crops[%d]: %v", i, j, err)
			}
			pc.where = fmt.Sprintf("volumes[%d].crops[%d] (%s)", i, j, cs.ID)
			if unknown {
				for name, bit := range m.Classes {
					if _, listed := c.Labels[name]; !listed {
						cs.Unknown |= 1 << bit
					}
				}
			}
			if ds.LabelNames != nil && !multi {
				for v, n := range pc.counts {
					if _, ok := ds.LabelNames[v]; n > 0 && !ok && (ignore <= 0 || v != ignore) {
						return nil, bad("%s: %s holds label value %d, which classes does not name", pc.where, cs.Label, v)
					}
				}
			}
			crops = append(crops, pc)
			ds.Cases = append(ds.Cases, cs)
		}
	}
	ds.Warnings = overlaps(crops)
	if m.ClassWeighting == nil || *m.ClassWeighting {
		w := classWeights(crops, ignore)
		for i := range ds.Cases {
			ds.Cases[i].Weight = w[i]
		}
	}
	k := 0
	for _, vol := range m.Volumes {
		for _, c := range vol.Crops {
			if c.Weight != nil {
				if w := *c.Weight; w < 0 || math.IsNaN(w) || math.IsInf(w, 0) {
					return nil, bad("%s: weight %g, want a finite value ≥ 0", crops[k].where, w)
				}
				ds.Cases[k].Weight = *c.Weight
			}
			k++
		}
	}
	return ds, ds.check("data.manifest " + path)
}

// placeCrop finds a crop's box in its raw volume and reads its label's
// class counts (through its mask, when it has one), on the raw's grid:
// the level of the raw's image group at the label's spacing, or the raw
// at the manifest's spacing (targetGrid: a level, or the raw interpolated
// onto it), else the raw onto which the label is resampled.
//
// With multi (model.targets multi_label) the crop's labels (class name →
// binary array, classes giving each name's bit) are read as one
// bit-packed label (volume.PackedPath), a class the crop does not list
// reading as absent everywhere (its Case.Unknown, set by the caller, says
// whether that means unknown), and its counts are per class: counts[c+1]
// the voxels of class c (so classWeights counts a voxel in every class it
// belongs to).
func placeCrop(root string, rv *rawVolume, c manifestCrop, ignore int, classes map[string]int, multi bool) (placedCrop, Case, error) {
	pc := placedCrop{raw: rv.path}
	switch {
	case len(c.Labels) > 0 && !multi:
		return pc, Case{}, errors.New("labels: one binary array per class (multi-label targets, classes may overlap) needs sigmoid outputs: set model.targets: multi_label and loss.name: dice_bce, or give one multi-class label map in label")
	case multi && c.Label != "":
		return pc, Case{}, errors.New("label: model.targets multi_label reads one binary array per class: give labels: {class: array, …} instead of one label map")
	case multi && len(c.Labels) == 0:
		return pc, Case{}, errors.New("labels: missing (model.targets multi_label: one binary array per class, {mito: crop/mito.zarr, …})")
	case c.Mask != "" && ignore <= 0:
		// Without an ignore label the masked-out voxels would have no
		// value to read as but background, and be trained as such.
		return pc, Case{}, errors.New("mask: needs loss.ignore_label, the value the voxels where the mask is 0 read as (and the losses and metrics leave out); set loss.ignore_label (≥ model.num_classes, e.g. 255)")
	case c.Label == "" && !multi:
		return pc, Case{}, errors.New("label: missing")
	case c.Offset != nil && c.Translation != nil:
		return pc, Case{}, errors.New("give offset or translation, not both")
	}
	var label, first string
	if multi {
		files := map[int]string{}
		names := make([]string, 0, len(c.Labels))
		for name := range c.Labels {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			bit, ok := classes[name]
			if !ok {
				return pc, Case{}, fmt.Errorf("labels: %s is not one of classes", name)
			}
			files[bit] = resolve(root, c.Labels[name])
		}
		label = volume.PackedPath(files)
		first = volume.FilePath(label)
	} else {
		label = resolve(root, c.Label)
		first = label
	}
	lf, err := volume.Open(label)
	if err != nil {
		return pc, Case{}, fmt.Errorf("label: %w", err)
	}
	defer func() { lf.Close() }()
	lfh := lf.Header()
	if lfh.Channels != 1 {
		return pc, Case{}, fmt.Errorf("label %s: %d channels, want one label map", label, lfh.Channels)
	}
	// lh is the label's geometry in the raw's unit (see Units above): what
	// placing it, choosing its level and resampling it compare with the
	// raw's numbers.
	lh, err := lfh.InUnit(rv.hdr.Unit)
	if err != nil {
		return pc, Case{}, fmt.Errorf("label %s: %w", first, err)
	}
	g, err := rv.grid(lh.Spacing)
	if err != nil {
		return pc, Case{}, fmt.Errorf("label %s at spacing %v: %w", label, spacingText(lfh, lh), err)
	}
	pc.raw = g.name
	rh := g.hdr
	caseLabel := label
	if c.Mask != "" {
		mask := resolve(root, c.Mask)
		mf, err := volume.Open(mask)
		if err != nil {
			return pc, Case{}, fmt.Errorf("mask: %w", err)
		}
		mfh := mf.Header()
		// In the label's unit (the raw's, when the raw states one).
		mh, err := mfh.InUnit(lh.Unit)
		if err != nil {
			mf.Close()
			return pc, Case{}, fmt.Errorf("mask %s: %w", mask, err)
		}
		if !sameSpacings(lh.Spacing, mh.Spacing) {
			mf.Close()
			return pc, Case{}, fmt.Errorf("mask %s: spacing %v %s differs from the label's %v %s (%s)", mask, mfh.Spacing, volume.UnitName(mfh.Unit), lfh.Spacing, volume.UnitName(lfh.Unit), label)
		}
		ml, err := volume.Masked(lf, mf, uint8(ignore))
		if err != nil {
			mf.Close()
			return pc, Case{}, fmt.Errorf("mask %s and label %s: %w", mask, label, err)
		}
		// The class counts below are the masked labels'.
		lf = ml
		caseLabel = volume.MaskedPath(label, mask, uint8(ignore))
	}
	resample := !sameSpacings(lh.Spacing, rh.Spacing)
	// at is the crop's place: the world position of its voxel (0, 0, 0).
	var at [3]float64
	switch {
	case c.Offset != nil:
		if len(c.Offset) != 3 {
			return pc, Case{}, fmt.Errorf("offset %v: want [z, y, x] voxels", c.Offset)
		}
		if resample {
			return pc, Case{}, fmt.Errorf("offset %v: counts voxels of the raw, and the label %s (spacing %v) is not on the raw's grid (%s, spacing %v%s): place it by translation or by its own origin", c.Offset, label, spacingText(lfh, lh), g.name, rh.Spacing, unitSuffix(rh.Unit))
		}
	case c.Translation != nil:
		if len(c.Translation) != 3 {
			return pc, Case{}, fmt.Errorf("translation %v: want [z, y, x] in the raw's units", c.Translation)
		}
		copy(at[:], c.Translation)
	default:
		at = origin(lh.Affine)
		if resample {
			if err := axisAligned(lh.Affine); err != nil {
				return pc, Case{}, fmt.Errorf("the label %s's origin: %w; place it by translation", label, err)
			}
		}
	}
	var box volume.Box
	switch {
	case c.Offset != nil:
		copy(box.Lo[:], c.Offset)
		for a := range 3 {
			box.Hi[a] = box.Lo[a] + lh.Shape[a]
		}
	case !resample:
		lo, err := voxelOf(rh, at)
		if err != nil {
			return pc, Case{}, fmt.Errorf("%s %v: %w (raw %s)", placeKey(c), at, err, g.name)
		}
		box.Lo = lo
		for a := range 3 {
			box.Hi[a] = lo[a] + lh.Shape[a]
		}
	default:
		if box, err = coveredBox(rh, lh, at); err != nil {
			return pc, Case{}, fmt.Errorf("%s %v: the label %s (spacing %v, shape %v) on the raw %s (spacing %v%s): %w", placeKey(c), at, label, spacingText(lfh, lh), lh.Shape, g.name, rh.Spacing, unitSuffix(rh.Unit), err)
		}
	}
	if !volume.Whole(rh.Shape).Contains(box) || box.Lo[0] < 0 || box.Lo[1] < 0 || box.Lo[2] < 0 {
		return pc, Case{}, fmt.Errorf("the crop %s (box %v..%v; spacing %s) is not inside the raw %s (box [0 0 0]..%v; spacing %v%s)", label, box.Lo, box.Hi, spacingText(lfh, lh), g.name, rh.Shape, rh.Spacing, unitSuffix(rh.Unit))
	}
	if resample {
		// The case's label is the crop read on the raw's grid over box.
		ro := origin(rh.Affine)
		r := volume.Resampling{Shape: box.Size(), Spacing: rh.Spacing, At: at}
		if f, _ := volume.UnitScale(lfh.Unit, rh.Unit); f != 1 {
			// The label's file is in another unit: the resampling
			// converts its spacing (only then: the paths of crops in
			// the raw's unit stay as they were).
			r.Unit = rh.Unit
		}
		for a := range 3 {
			r.Origin[a] = ro[a] + float64(box.Lo[a])*rh.Spacing[a]
		}
		rf, err := volume.Resampled(lf, r)
		if err != nil {
			return pc, Case{}, fmt.Errorf("label %s: %w", label, err)
		}
		lf = rf
		caseLabel = volume.ResampledPath(caseLabel, r)
	}
	pc.box = box
	// The crop's labels are read whole, on the raw's grid, to count its
	// classes (the raw itself is never read here, whatever its size).
	if err := volume.CheckInMemory(box.Size(), 1); err != nil {
		return pc, Case{}, fmt.Errorf("label %s (box %v..%v of the raw %s): %w", first, box.Lo, box.Hi, g.name, err)
	}
	lbl := make([]uint8, box.Voxels())
	if err := lf.ReadLabels(volume.Whole(box.Size()), lbl); err != nil {
		return pc, Case{}, fmt.Errorf("label %s: %w", first, err)
	}
	pc.counts = make([]int64, 256)
	for _, v := range lbl {
		pc.counts[v]++
	}
	if multi {
		pc.counts = classCounts(pc.counts)
	}
	cs := Case{ID: c.ID, Images: []string{volume.WindowPath(g.path, box)}, Label: caseLabel, Weight: 1, Placed: true}
	if cs.ID == "" {
		cs.ID = stripExt(filepath.Base(first))
		if multi {
			// One crop's class arrays sit side by side, in the crop's
			// folder (cellmap's crop123/mito, crop123/er).
			cs.ID = stripExt(filepath.Base(filepath.Dir(first)))
		}
	}
	return pc, cs, nil
}

// spacingText is a label's spacing for messages: as its file gives it
// and, when that is in another unit than the raw's, as compared (lh,
// converted), so that a crop misplaced by a unit is seen to be.
func spacingText(file, lh volume.Header) string {
	if f, _ := volume.UnitScale(file.Unit, lh.Unit); f == 1 {
		return fmt.Sprint(file.Spacing) + unitSuffix(file.Unit)
	}
	return fmt.Sprintf("%v %s = %v %s", file.Spacing, file.Unit, lh.Spacing, lh.Unit)
}

// unitSuffix is " unit" for messages, "" for no unit.
func unitSuffix(u string) string {
	if u == "" {
		return ""
	}
	return " " + u
}

// coveredBox is the box of the raw's voxels (header rh) that a label
// crop (header lh, its voxel (0, 0, 0) at world position at) covers
// wholly: rounded inward, so that no raw voxel's nearest label voxel
// lies outside the crop. Voxel positions are centres: the crop spans
// at ± spacing/2 beyond its first and last voxels' centres.
func coveredBox(rh, lh volume.Header, at [3]float64) (volume.Box, error) {
	var box volume.Box
	if err := axisAligned(rh.Affine); err != nil {
		return box, fmt.Errorf("the raw's %w", err)
	}
	o := origin(rh.Affine)
	for a := range 3 {
		s, ls := rh.Spacing[a], lh.Spacing[a]
		if r := 2 - a; rh.Affine[r][r] <= 0 {
			return box, fmt.Errorf("the raw's axis %d runs backwards (affine step %g): labels at another spacing are placed only on raw axes with positive steps", a, rh.Affine[r][r])
		}
		lo := at[a] - ls/2                          // the crop's extent
		hi := at[a] + (float64(lh.Shape[a])-0.5)*ls // on axis a
		// Raw voxel i spans o + (i ± ½)·s; tolerate float error of a
		// millionth of a voxel at the crop's faces.
		box.Lo[a] = int(math.Ceil((lo-o[a])/s + 0.5 - 1e-6))
		box.Hi[a] = int(math.Floor((hi-o[a])/s + 0.5 + 1e-6))
		if box.Hi[a] <= box.Lo[a] {
			return box, fmt.Errorf("axis %d: the crop's %g (%d voxels of %g) covers no whole voxel of the raw's %g", a, hi-lo, lh.Shape[a], ls, s)
		}
	}
	return box, nil
}

// axisAligned reports an affine whose axes are not the world's.
func axisAligned(m volume.Affine) error {
	for r := range 3 {
		for c := range 3 {
			if c != r && m[r][c] != 0 {
				return errors.New("affine is not axis-aligned")
			}
		}
	}
	return nil
}

// sameSpacings reports whether two (D, H, W) voxel sizes agree within
// spacingTol on every axis.
func sameSpacings(a, b [3]float64) bool {
	for k := range 3 {
		if !sameSpacing(a[k], b[k]) {
			return false
		}
	}
	return true
}

// sameSpacing reports whether two voxel sizes agree within spacingTol.
func sameSpacing(a, b float64) bool {
	return math.Abs(a-b) <= spacingTol*max(math.Abs(a), math.Abs(b))
}

func placeKey(c manifestCrop) string {
	if c.Translation != nil {
		return "translation"
	}
	return "the label's origin"
}

// origin is an affine's world position of voxel (0, 0, 0) in (D, H, W) =
// (z, y, x) order.
func origin(m volume.Affine) [3]float64 {
	return [3]float64{m[2][3], m[1][3], m[0][3]}
}

// voxelOf finds the raw's voxel at world position at ((z, y, x)): the
// raw's affine must be axis-aligned, and at must fall on a voxel corner
// of its grid (a crop between voxels would need resampling).
func voxelOf(rh volume.Header, at [3]float64) ([3]int, error) {
	var lo [3]int
	o := origin(rh.Affine)
	for a := range 3 {
		r := 2 - a // affine row of (D, H, W) axis a
		for c := range 3 {
			if c != r && rh.Affine[r][c] != 0 {
				return lo, errors.New("the raw's affine is not axis-aligned; place the crop by offset")
			}
		}
		step := rh.Affine[r][r]
		if step == 0 {
			return lo, errors.New("the raw's affine has a zero scale")
		}
		f := (at[a] - o[a]) / step
		n := math.Round(f)
		if math.Abs(f-n) > 1e-3 {
			return lo, fmt.Errorf("falls between the raw's voxels on axis %d (voxel %.4f)", a, f)
		}
		lo[a] = int(n)
	}
	return lo, nil
}

// overlaps warns of crops of one raw volume that share voxels: their
// voxels are drawn more often, and the two may disagree.
func overlaps(crops []placedCrop) []string {
	var out []string
	for i := range crops {
		for j := i + 1; j < len(crops); j++ {
			a, b := crops[i], crops[j]
			if a.raw != b.raw {
				continue
			}
			in := volume.Box{}
			for k := range 3 {
				in.Lo[k], in.Hi[k] = max(a.box.Lo[k], b.box.Lo[k]), min(a.box.Hi[k], b.box.Hi[k])
			}
			if !in.Empty() {
				out = append(out, fmt.Sprintf("data.manifest: %s and %s overlap in %s (box %v..%v): those voxels are sampled from both", a.where, b.where, a.raw, in.Lo, in.Hi))
			}
		}
	}
	return out
}

// classCounts turns the counts of bit-packed bytes into counts per class,
// class c at index c+1 as classWeights reads them: a voxel counts in every
// class whose bit it has; ignored voxels (255) in none.
func classCounts(bytes []int64) []int64 {
	out := make([]int64, 256)
	for v, n := range bytes {
		if v == volume.IgnoreByte {
			continue
		}
		for c := 0; c < volume.MaxBitClasses; c++ {
			if v>>c&1 != 0 {
				out[c+1] += n
			}
		}
	}
	return out
}

// classWeights are cellmap-data's sampling weights (CellMapMultiDataset's
// dataset_weights), one per crop: a class c's weight is 1 − N_c/N (N_c
// its voxels over all crops, N all classes' voxels; 0.1 when c is the only
// class present), and a crop's weight is Σ_c n_c·w_c over the foreground
// classes (label values > 0) it holds. A crop without foreground weighs 0
// and is never drawn for training, as in cellmap. The ignore label
// (ignore > 0) is no class: its voxels count nowhere. A multi-label class
// counts only in the crops that list it, as cellmap sums a class's counts
// over the datasets that have it: an unlisted class has no bit in the
// packed label, so no voxels there (absent or unknown alike).
func classWeights(crops []placedCrop, ignore int) []float64 {
	total := make([]float64, 256)
	sum := 0.0
	for _, c := range crops {
		for v := 1; v < 256; v++ {
			if v == ignore {
				continue
			}
			total[v] += float64(c.counts[v])
			sum += float64(c.counts[v])
		}
	}
	var present []int
	for v := 1; v < 256; v++ {
		if total[v] > 0 {
			present = append(present, v)
		}
	}
	sort.Ints(present)
	cw := make([]float64, 256)
	for _, v := range present {
		if len(present) == 1 || total[v] == sum {
			cw[v] = 0.1
		} else {
			cw[v] = 1 - total[v]/sum
		}
	}
	out := make([]float64, len(crops))
	for i, c := range crops {
		for _, v := range present {
			out[i] += float64(c.counts[v]) * cw[v]
		}
	}
	return out
}
