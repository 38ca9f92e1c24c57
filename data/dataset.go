package data

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/evaluation"
	"github.com/voxtrain/voxtrain/volume"
)

// Case is one training case: image channels and a label map.
type Case struct {
	// ID names the case (file name without extension and channel suffix).
	ID string
	// Images holds one file per channel, or one 4D file whose 4th axis is
	// the channel.
	Images []string
	// Label is the label map, "" when the case has none.
	Label string
	// Weight is the sampling weight (1 unless configured).
	Weight float64
	// Placed reports a label crop whose place in the image is a
	// manifest's (its offset or translation), not its file's affine:
	// Verify compares the two files' spacing only.
	Placed bool
	// Unknown has bit c set for each multi-label class (output channel)
	// c the case does not annotate — a manifest crop's unlisted classes
	// with unlisted_classes: unknown — whose target is then unknown
	// everywhere in the case: the loss and the validation scores leave it
	// out. 0: every class is known (any other dataset).
	Unknown uint8
}

// Files returns the case's files, images first.
func (c Case) Files() []string {
	f := append([]string(nil), c.Images...)
	if c.Label != "" {
		f = append(f, c.Label)
	}
	return f
}

// Dataset is an ordered list of cases. Case order is the order of the
// dataset description (MSD training list, sorted nnU-Net file names, or
// the explicit list); sample jobs refer to cases by index in it.
type Dataset struct {
	// Root is the dataset folder ("" for an explicit list without one).
	Root string
	// Format is "msd", "nnunet", "list" or "manifest".
	Format string
	// Channels is the number of image channels the description declares
	// (0 when it does not; the reader then takes what the files hold).
	Channels int
	// ChannelNames maps channel index to the name dataset.json gives it
	// (nnU-Net v2's channel_names, else MSD's modality; "CT" chooses CT
	// normalisation in the planner), nil when it names none.
	ChannelNames map[int]string
	// LabelNames maps class index to name where the description has them
	// (never the ignore label).
	LabelNames map[int]string
	// MultiLabelNames names each output channel of multi-label targets
	// (model.targets multi_label: a manifest's classes, dataset.json's
	// regions), nil otherwise; LabelNames is then nil.
	MultiLabelNames []string
	// Regions are dataset.json's nnU-Net regions, one per output channel
	// (evaluation.DatasetRegions: the file's order, a repeated region
	// kept; each names itself and spells its summary.json key), nil
	// otherwise.
	Regions []evaluation.Region
	// RegionsClassOrder is dataset.json's regions_class_order for nnU-Net
	// regions (the label value region r paints in a prediction), nil
	// otherwise.
	RegionsClassOrder []int
	// RegionBits maps each label value of nnU-Net regions to the bits of
	// the regions holding it (the ignore label to 255), the table every
	// case's label reads through; nil otherwise. Scoring a prediction
	// painted by RegionsClassOrder through it gives nnU-Net's region
	// masks (np.isin(seg, region)) as bits.
	RegionBits []uint8
	// IgnoreLabel is the label value dataset.json's "labels" names
	// "ignore" (nnU-Net v2's ignore label; 0: none). Verify holds it to
	// loss.ignore_label.
	IgnoreLabel int
	// Cases are the training cases.
	Cases []Case
	// Warnings are what the description allows but a user should hear
	// of (a manifest's overlapping crops); Verify logs them.
	Warnings []string
}

// HasUnknown reports whether any case leaves classes unknown
// (Case.Unknown): the multi-label loss must then allow them
// (nn.Criterion.AllowUnknown).
func (d *Dataset) HasUnknown() bool { return d.unknownClasses() != nil }

// unknownClasses returns every case's Case.Unknown by index, nil when
// every case knows every class.
func (d *Dataset) unknownClasses() []uint8 {
	var out []uint8
	for i, c := range d.Cases {
		if c.Unknown != 0 && out == nil {
			out = make([]uint8, len(d.Cases))
		}
		if out != nil {
			out[i] = c.Unknown
		}
	}
	return out
}

// Index returns the position of the case with this ID, or -1.
func (d *Dataset) Index(id string) int {
	for i, c := range d.Cases {
		if c.ID == id {
			return i
		}
	}
	return -1
}

// OpenDataset finds the cases a config describes: its explicit case list,
// else the MSD or nnU-Net layout under cfg.Dataset. Every listed file must
// exist. Case weights from cfg.CaseWeights are applied.
func OpenDataset(cfg config.Data) (*Dataset, error) {
	var (
		ds  *Dataset
		err error
	)
	switch {
	case cfg.Manifest != "":
		ds, err = loadManifest(cfg.Manifest, cfg.IgnoreLabel, cfg.MultiLabel)
	case len(cfg.Cases) > 0:
		ds, err = fromList(cfg.Dataset, cfg.Cases)
	case cfg.Format == "msd":
		ds, err = loadMSD(cfg.Dataset)
	case cfg.Format == "nnunet":
		ds, err = loadNNUNet(cfg.Dataset)
	default:
		ds, err = detect(cfg.Dataset)
	}
	if err != nil {
		return nil, err
	}
	// The labels' bytes mean classes or bits: the config and the data
	// must agree.
	where := cmp.Or(cfg.Manifest, cfg.Dataset)
	if cfg.MultiLabel && ds.MultiLabelNames == nil {
		return nil, fmt.Errorf("model.targets: multi_label, but %s has plain classes (no nnU-Net regions in its dataset.json, no per-class labels in a manifest); set model.targets: softmax", where)
	}
	if !cfg.MultiLabel && ds.MultiLabelNames != nil {
		return nil, fmt.Errorf("model.targets: softmax, but %s has nnU-Net regions (labels as lists, regions_class_order), trained with sigmoid outputs: set model.targets: multi_label and loss.name: dice_bce", filepath.Join(cfg.Dataset, "dataset.json"))
	}
	for id, w := range cfg.CaseWeights {
		i := ds.Index(id)
		if i < 0 {
			return nil, fmt.Errorf("data.case_weights: no case %q in the dataset", id)
		}
		ds.Cases[i].Weight = w
	}
	return ds, nil
}

func detect(dir string) (*Dataset, error) {
	if dir == "" {
		return nil, errors.New("data.dataset: not set")
	}
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("data.dataset: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("data.dataset: %s is not a folder (want an MSD or nnU-Net dataset folder)", dir)
	}
	meta, err := readMeta(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if meta != nil && meta.Training != nil {
		return loadMSD(dir)
	}
	return loadNNUNet(dir)
}

// datasetJSON is the part of an MSD / nnU-Net dataset.json we read.
type datasetJSON struct {
	Training     []msdEntry                 `json:"training"`
	Modality     map[string]string          `json:"modality"`      // MSD, nnU-Net v1
	ChannelNames map[string]string          `json:"channel_names"` // nnU-Net v2
	Labels       map[string]json.RawMessage `json:"labels"`
	FileEnding   string                     `json:"file_ending"`
	NumTraining  *int                       `json:"numTraining"`
	// RegionsClassOrder is nnU-Net v2's region-based training (labels
	// given as lists of classes): the label value each region paints, in
	// this order, when sigmoid outputs become a label map.
	RegionsClassOrder json.RawMessage `json:"regions_class_order"`

	// ignore is labels' "ignore" value (0: none), set by check.
	ignore int
	// rawLabels is "labels" as the file has it (its keys' order is the
	// regions'); regions and classOrder are nnU-Net's regions (nil: plain
	// classes), set by check.
	rawLabels  json.RawMessage
	regions    []evaluation.Region
	classOrder []int
}

type msdEntry struct {
	Image json.RawMessage `json:"image"`
	Label string          `json:"label"`
}

func readMeta(dir string) (*datasetJSON, error) {
	path := filepath.Join(dir, "dataset.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var m datasetJSON
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	var raw struct {
		Labels json.RawMessage `json:"labels"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	m.rawLabels = raw.Labels
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &m, nil
}

// check refuses what voxtrain would otherwise train wrongly without a
// word: nnU-Net v2's regions (a label given as a list of classes, with
// regions_class_order) would be trained as plain classes; an ignore label
// that is not an integer above every class (nnU-Net v2 requires it to be
// the highest label value); and a file_ending no registered reader opens
// would find no cases, or the wrong files. It records the ignore label,
// which Verify holds to loss.ignore_label.
func (m *datasetJSON) check() error {
	if err := m.checkRegions(); err != nil {
		return err
	}
	keys := make([]string, 0, len(m.Labels))
	for k := range m.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		raw := m.Labels[k]
		if strings.EqualFold(k, "ignore") {
			var n int
			if json.Unmarshal(raw, &n) != nil || n <= 0 || n > 255 {
				return fmt.Errorf("labels: %q is %s, want nnU-Net v2's ignore label, an integer in 1..255", k, raw)
			}
			m.ignore = n
			continue
		}
	}
	if m.ignore > 0 {
		for v, name := range m.labelNames() {
			if v >= m.ignore {
				return fmt.Errorf("labels: \"ignore\" is %d but class %q is %d; the ignore label must be the highest label value (nnU-Net v2)", m.ignore, name, v)
			}
		}
	}
	if m.FileEnding != "" && !volume.Readable("case"+m.FileEnding) {
		return fmt.Errorf("file_ending: no volume reader opens %q files (readers: %v)", m.FileEnding, volume.Formats())
	}
	return nil
}

// checkRegions reads nnU-Net v2's regions as package evaluation reads
// them for scoring (evaluation.DatasetRegions, nnU-Net's LabelManager):
// region-based only when some label is a list of more than one entry,
// then every label but background and ignore a region (a plain value a
// region of one), in the file's order, and regions_class_order one label
// value per region. Lists of one entry alone are plain classes, and
// regions_class_order is then unread, as in nnU-Net.
func (m *datasetJSON) checkRegions() error {
	regions, order, err := evaluation.DatasetRegions(m.rawLabels, m.RegionsClassOrder)
	if err != nil {
		return err
	}
	if len(regions) > volume.MaxBitClasses {
		return fmt.Errorf("labels: %d regions, at most %d fit voxtrain's bit-packed multi-label bytes", len(regions), volume.MaxBitClasses)
	}
	m.regions, m.classOrder = regions, order
	return nil
}

// applyRegions makes a dataset of nnU-Net regions multi-label: each
// case's label reads through a table (volume.LUTPath) from label value to
// the bits of the regions holding it, the ignore label to 255.
func (m *datasetJSON) applyRegions(ds *Dataset) {
	if m.regions == nil {
		return
	}
	var lut [256]uint8
	ds.MultiLabelNames = nil
	for r, reg := range m.regions {
		ds.MultiLabelNames = append(ds.MultiLabelNames, reg.Name)
		for _, v := range reg.Labels {
			lut[v] |= 1 << r
		}
	}
	if m.ignore > 0 {
		lut[m.ignore] = volume.IgnoreByte
		ds.IgnoreLabel = volume.IgnoreByte
	}
	ds.LabelNames = nil
	ds.Regions = m.regions
	ds.RegionsClassOrder = m.classOrder
	ds.RegionBits = lut[:]
	for i := range ds.Cases {
		if ds.Cases[i].Label != "" {
			ds.Cases[i].Label = volume.LUTPath(ds.Cases[i].Label, lut)
		}
	}
}

// RegionsClassOrder returns the regions_class_order of the nnU-Net
// regions of the dataset.json in dir (nil when its labels are plain
// classes): the label value each multi-label channel paints in a
// prediction.
func RegionsClassOrder(dir string) ([]int, error) {
	m, err := readMeta(dir)
	if err != nil {
		return nil, err
	}
	if m.regions == nil {
		return nil, nil
	}
	return m.classOrder, nil
}

// labelNames reads MSD {"0": "background"} and nnU-Net v2
// {"background": 0} label maps; a list of one entry names that label, as
// nnU-Net reads it outside regions (longer lists, regions, are skipped).
// A value named by two keys takes the first of them in sorted order, the
// same name every run.
func (m *datasetJSON) labelNames() map[int]string {
	if len(m.Labels) == 0 {
		return nil
	}
	out := map[int]string{}
	keys := slices.Sorted(maps.Keys(m.Labels))
	slices.Reverse(keys) // later keys are overwritten by earlier ones
	for _, k := range keys {
		raw := m.Labels[k]
		if strings.EqualFold(k, "ignore") {
			continue // not a class
		}
		var name string
		if i, err := strconv.Atoi(k); err == nil && json.Unmarshal(raw, &name) == nil {
			out[i] = name
			continue
		}
		var i int
		var one []int
		if json.Unmarshal(raw, &i) == nil {
			out[i] = k
		} else if json.Unmarshal(raw, &one) == nil && len(one) == 1 {
			out[one[0]] = k
		}
	}
	return out
}

func (m *datasetJSON) channels() int {
	return len(m.channelNames())
}

// channelNames are channel_names (nnU-Net v2), else modality (MSD), by
// channel index; keys that are not indices are left out.
func (m *datasetJSON) channelNames() map[int]string {
	names := m.ChannelNames
	if len(names) == 0 {
		names = m.Modality
	}
	out := map[int]string{}
	for k, v := range names {
		if i, err := strconv.Atoi(k); err == nil {
			out[i] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// loadMSD reads a Medical Segmentation Decathlon dataset.json: its
// "training" list of {image, label}, where image is one file (3D, or 4D
// with the channels on the 4th axis) or a list of files, one per channel.
func loadMSD(dir string) (*Dataset, error) {
	meta, err := readMeta(dir)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "dataset.json")
	if len(meta.Training) == 0 {
		return nil, fmt.Errorf("%s: no \"training\" cases", path)
	}
	ds := &Dataset{Root: dir, Format: "msd", Channels: meta.channels(), ChannelNames: meta.channelNames(), LabelNames: meta.labelNames(), IgnoreLabel: meta.ignore}
	for i, e := range meta.Training {
		var imgs []string
		var one string
		if err := json.Unmarshal(e.Image, &one); err == nil {
			imgs = []string{one}
		} else if err := json.Unmarshal(e.Image, &imgs); err != nil || len(imgs) == 0 {
			return nil, fmt.Errorf("%s: training[%d].image is neither a path nor a list of paths", path, i)
		}
		c := Case{Weight: 1, Label: e.Label}
		for _, im := range imgs {
			c.Images = append(c.Images, resolve(dir, im))
		}
		if c.Label != "" {
			c.Label = resolve(dir, c.Label)
			c.ID = stripExt(filepath.Base(c.Label))
		} else {
			c.ID = stripExt(filepath.Base(c.Images[0]))
		}
		ds.Cases = append(ds.Cases, c)
	}
	if len(ds.Cases) > 0 && len(ds.Cases[0].Images) > 1 && ds.Channels == 0 {
		ds.Channels = len(ds.Cases[0].Images)
	}
	meta.applyRegions(ds)
	return ds, ds.check(path)
}

var channelFile = regexp.MustCompile(`^(.+)_(\d{4})(\.nii\.gz|\.nii)$`)

// channelFileWith matches CASE_XXXX<ending> for a dataset.json's
// file_ending.
func channelFileWith(ending string) *regexp.Regexp {
	return regexp.MustCompile(`^(.+)_(\d{4})(` + regexp.QuoteMeta(ending) + `)$`)
}

// loadNNUNet reads the nnU-Net raw layout: imagesTr/CASE_XXXX.nii(.gz)
// (XXXX the channel, from 0000) and labelsTr/CASE.nii(.gz). Cases are
// sorted by ID.
func loadNNUNet(dir string) (*Dataset, error) {
	ds := &Dataset{Root: dir, Format: "nnunet"}
	pattern, ending := channelFile, "(.nii.gz or .nii)"
	meta, err := readMeta(dir)
	if err == nil {
		ds.Channels, ds.ChannelNames, ds.LabelNames, ds.IgnoreLabel = meta.channels(), meta.channelNames(), meta.labelNames(), meta.ignore
		if meta.FileEnding != "" {
			pattern, ending = channelFileWith(meta.FileEnding), meta.FileEnding
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	imgDir := filepath.Join(dir, "imagesTr")
	ents, err := os.ReadDir(imgDir)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w (not an MSD dataset.json with a training list either)", imgDir, err)
	}
	type chans struct {
		files map[int]string
		ext   string
	}
	byCase := map[string]*chans{}
	for _, e := range ents {
		m := pattern.FindStringSubmatch(e.Name())
		// A folder is a case file only where a format reads folders
		// (a .zarr, .ome.zarr or .n5 store).
		if m == nil || (e.IsDir() && !volume.Readable(filepath.Join(imgDir, e.Name()))) {
			continue
		}
		ch, _ := strconv.Atoi(m[2])
		c := byCase[m[1]]
		if c == nil {
			c = &chans{files: map[int]string{}, ext: m[3]}
			byCase[m[1]] = c
		}
		c.files[ch] = filepath.Join(imgDir, e.Name())
	}
	if len(byCase) == 0 {
		return nil, fmt.Errorf("%s: no CASE_0000%s files", imgDir, ending)
	}
	ids := make([]string, 0, len(byCase))
	for id := range byCase {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		c := byCase[id]
		n := len(c.files)
		if ds.Channels == 0 {
			ds.Channels = n
		}
		if n != ds.Channels {
			return nil, fmt.Errorf("%s: case %s has %d channel files, want %d", imgDir, id, n, ds.Channels)
		}
		cs := Case{ID: id, Weight: 1}
		for ch := 0; ch < n; ch++ {
			f, ok := c.files[ch]
			if !ok {
				return nil, fmt.Errorf("%s: case %s lacks channel %d: no %s_%04d%s", imgDir, id, ch, id, ch, c.ext)
			}
			cs.Images = append(cs.Images, f)
		}
		cs.Label = filepath.Join(dir, "labelsTr", id+c.ext)
		ds.Cases = append(ds.Cases, cs)
	}
	// The files are found by name, so numTraining is what tells that some
	// went missing (nnU-Net's verify_dataset_integrity checks it too).
	if meta != nil && meta.NumTraining != nil && *meta.NumTraining != len(ds.Cases) {
		return nil, fmt.Errorf("%s: numTraining is %d but %s holds %d cases", filepath.Join(dir, "dataset.json"), *meta.NumTraining, imgDir, len(ds.Cases))
	}
	if meta != nil {
		meta.applyRegions(ds)
	}
	return ds, ds.check(imgDir)
}

// fromList builds a dataset from explicit case specs; relative paths are
// taken relative to root.
func fromList(root string, specs []config.CaseSpec) (*Dataset, error) {
	ds := &Dataset{Root: root, Format: "list"}
	for i, s := range specs {
		if len(s.Image) == 0 {
			return nil, fmt.Errorf("data.cases[%d].image: missing", i)
		}
		c := Case{ID: s.ID, Weight: 1}
		if s.Weight != 0 {
			c.Weight = s.Weight
		}
		for _, im := range s.Image {
			c.Images = append(c.Images, resolve(root, im))
		}
		if s.Label != "" {
			c.Label = resolve(root, s.Label)
		}
		if c.ID == "" {
			if c.Label != "" {
				c.ID = stripExt(filepath.Base(c.Label))
			} else {
				c.ID = stripExt(filepath.Base(c.Images[0]))
			}
		}
		ds.Cases = append(ds.Cases, c)
	}
	if len(ds.Cases) > 0 && len(ds.Cases[0].Images) > 1 {
		ds.Channels = len(ds.Cases[0].Images)
	}
	return ds, ds.check("data.cases")
}

// check verifies IDs are unique, channel file counts agree and every file
// exists; where names the description in errors.
func (d *Dataset) check(where string) error {
	seen := make(map[string]bool, len(d.Cases))
	for _, c := range d.Cases {
		if seen[c.ID] {
			return fmt.Errorf("%s: case ID %q appears twice", where, c.ID)
		}
		seen[c.ID] = true
		if len(c.Images) > 1 && d.Channels != 0 && len(c.Images) != d.Channels {
			return fmt.Errorf("%s: case %s has %d image files, want %d channels", where, c.ID, len(c.Images), d.Channels)
		}
		for _, f := range c.Files() {
			if volume.IsURL(f) {
				// A remote store is not looked at here (that is a
				// GET); opening it reports what is wrong with it.
				if !volume.ReadsURL(f) {
					return fmt.Errorf("%s: case %s: %s: no volume format reads this URL (Zarr and N5 stores are read over http(s))", where, c.ID, f)
				}
				continue
			}
			st, err := os.Stat(volume.FilePath(f))
			if err != nil {
				return fmt.Errorf("%s: case %s: %w", where, c.ID, err)
			}
			if st.IsDir() {
				if volume.Readable(f) { // a Zarr or N5 store
					continue
				}
				return fmt.Errorf("%s: case %s: %s is a folder", where, c.ID, f)
			}
			// A FIFO, socket or device would block or stream forever where
			// a volume is read whole or by region.
			if !st.Mode().IsRegular() {
				return fmt.Errorf("%s: case %s: %s is not a regular file (%s)", where, c.ID, f, fileKind(st.Mode()))
			}
		}
	}
	return nil
}

// fileKind names a non-regular file's type.
func fileKind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return m.Type().String()
}

func resolve(root, p string) string {
	if volume.IsURL(p) {
		return p
	}
	if filepath.IsAbs(p) || root == "" {
		return filepath.Clean(p)
	}
	return filepath.Join(root, p)
}

// stripExt drops a volume file's extension (.nii.gz, .nii, .hdr, .img,
// optionally .gz; .nrrd, .nhdr, .mha, .mhd, .tif, .tiff; .ome.zarr,
// .zarr, .n5) to give a case ID.
func stripExt(name string) string {
	for _, ext := range []string{".nii.gz", ".nii", ".hdr.gz", ".img.gz", ".hdr", ".img",
		".nrrd", ".nhdr", ".mha", ".mhd", ".tiff", ".tif", ".ome.zarr", ".zarr", ".n5"} {
		if strings.HasSuffix(name, ext) {
			return strings.TrimSuffix(name, ext)
		}
	}
	return name
}
