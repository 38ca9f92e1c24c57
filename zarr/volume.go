package zarr

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/voxtrain/voxtrain/volume"
)

// Zarr, OME-Zarr and N5 stores are volume formats once this package is
// linked in.
func init() {
	volume.Register(volume.Format{Name: "zarr", Match: Match, Open: Open, URLs: true})
}

// storeSuffixes are the directory names of a store.
var storeSuffixes = []string{".zarr", ".n5"}

// Match reports whether path names a store (case.zarr, case.ome.zarr,
// case.n5) or an array inside one (case.ome.zarr/1, case.n5/s0): a name
// with an extension inside a store (x.zarr/y.nii.gz) is some other
// format's file.
func Match(path string) bool {
	_, inner, ok := splitStore(path)
	return ok && !strings.Contains(pathBase(inner), ".")
}

func pathBase(p string) string {
	if p == "" {
		return ""
	}
	return p[strings.LastIndex(p, "/")+1:]
}

// splitStore splits path (a file path or an http(s) URL) into the
// store's root and the path inside it.
func splitStore(path string) (root, inner string, ok bool) {
	prefix, p := "", filepath.ToSlash(filepath.Clean(path))
	if isURL(path) {
		prefix, p = splitURL(cleanLoc(path))
	}
	parts := strings.Split(p, "/")
	for i := len(parts) - 1; i >= 0; i-- {
		for _, s := range storeSuffixes {
			if strings.HasSuffix(strings.ToLower(parts[i]), s) && len(parts[i]) > len(s) {
				root := strings.Join(parts[:i+1], "/")
				if prefix == "" {
					root = filepath.FromSlash(root)
				}
				return prefix + root, strings.Join(parts[i+1:], "/"), true
			}
		}
	}
	return "", "", false
}

// Options choose what Open reads of a store.
type Options struct {
	// Level is the multiscale level of an OME-Zarr image or a COSEM N5
	// group (0, the finest, by default). Ignored when TargetSpacing is set or the path names an
	// array.
	Level int
	// TargetSpacing, when non-zero, picks the level with ChooseLevel:
	// the coarsest whose spacing is nowhere coarser than this (D, H, W).
	TargetSpacing [3]float64
	// TargetUnit is the unit TargetSpacing is in (any spelling
	// volume.NormalizeUnit reads: "millimeter", "mm"): the levels'
	// spacings are converted into it before they are compared (a model's
	// spacing in millimetres, an image in micrometres). Empty, or an image
	// that states no unit: the numbers are compared as they are.
	TargetUnit string
	// CacheBytes bounds the file's cache of decoded chunks
	// (DefaultCacheBytes when 0; negative: no cache).
	CacheBytes int64
	// Cache, when not nil, is the cache of decoded chunks the file uses
	// instead of its own (CacheBytes is then ignored): files that share
	// it share their decoded chunks, and Close leaves it as it is.
	Cache *Cache

	// Reading a store given as an http:// or https:// URL (ignored for
	// local stores):

	// Timeout bounds each GET, its body included (DefaultTimeout, 30 s,
	// when 0).
	Timeout time.Duration
	// Retries is how many times a GET that failed in a way that may pass
	// (a 5xx or 429 status, a timeout, a broken connection) is tried
	// again, waiting 250 ms, then twice as long each time
	// (DefaultRetries, 4, when 0; negative: none).
	Retries int
	// MaxConcurrent bounds the GETs of the file in flight at a time
	// (DefaultMaxConcurrent, 16, when 0); a read fetches that many
	// chunks at a time.
	MaxConcurrent int
}

// Open opens a store (or an array in one) as a volume, with the default
// Options: level 0 of an OME-Zarr image.
func Open(path string) (volume.File, error) { return OpenWith(path, Options{}) }

// Level describes one level of a multiscale image.
type Level struct {
	// Path is the level's array, relative to the image group.
	Path    string
	Shape   [3]int
	Spacing [3]float64
	// Origin is the position of the level's voxel (0, 0, 0) (D, H, W: z,
	// y, x), in Spacing's unit: its OME-NGFF translation or COSEM
	// translate. A coarser level's is usually offset from the finest's
	// by half its extra extent, its voxels centred on the finer voxels
	// they cover.
	Origin [3]float64
	// Unit is Spacing's (volume.Header.Unit): the image's, every level's.
	Unit string
	// Header is the level's whole header, as opening its path gives it:
	// what a caller that lists the levels needs not open again (several
	// requests per level over HTTP).
	Header volume.Header
}

// levelOf describes the level at path whose header is h.
func levelOf(path string, h volume.Header) Level {
	return Level{Path: path, Shape: h.Shape, Spacing: h.Spacing, Unit: h.Unit, Header: h,
		Origin: [3]float64{h.Affine[2][3], h.Affine[1][3], h.Affine[0][3]}}
}

// Levels lists a store's multiscale levels, finest first (one level for
// a plain array; all of the image's when path names one of its levels).
func Levels(path string) ([]Level, error) {
	n, err := resolve(newSource(context.Background(), path, Options{}), path)
	if err != nil {
		return nil, err
	}
	return n.levels()
}

// ImageLevels lists the levels of path when it names a multiscale
// image's group (OME-NGFF's, or a COSEM N5 group as OpenOrganelle
// publishes), finest first; nil (and no error) when it names an array, a
// level of an image included, which is read as it is.
// A dataset manifest picks, per label crop, the level of a raw image
// group at the crop's resolution, or at its target spacing (interpolating
// from one of them when none is there).
func ImageLevels(path string) ([]Level, error) {
	n, err := resolve(newSource(context.Background(), path, Options{}), path)
	if err != nil {
		return nil, err
	}
	if n.ms == nil || n.named >= 0 {
		return nil, nil
	}
	return n.levels()
}

// levels lists the levels of the image n is (or the array).
func (n *node) levels() ([]Level, error) {
	if n.ms == nil {
		f, err := n.open(0, -1)
		if err != nil {
			return nil, err
		}
		return []Level{levelOf(".", f.hdr)}, nil
	}
	var out []Level
	g := *n
	g.named = -1 // every level, also when path named one
	for i, d := range n.ms.Datasets {
		f, err := g.open(i, -1)
		if err != nil {
			return nil, err
		}
		out = append(out, levelOf(d.Path, f.hdr))
	}
	return out, nil
}

// ChooseLevel returns the index of the coarsest level whose spacing is
// at most target on every axis (within 0.1%): reading it and resampling
// to target loses nothing the finer levels hold. 0 when none is.
func ChooseLevel(levels []Level, target [3]float64) int {
	best := 0
	for i, l := range levels {
		ok := true
		for a := range 3 {
			if l.Spacing[a] > target[a]*1.001 {
				ok = false
			}
		}
		if ok && l.Spacing[0]*l.Spacing[1]*l.Spacing[2] > levels[best].Spacing[0]*levels[best].Spacing[1]*levels[best].Spacing[2] {
			best = i
		}
	}
	return best
}

// levelsIn returns ls with their spacings converted into unit u (as
// volume.UnitScale converts: unchanged where either states no unit), for
// ChooseLevel; their Unit says u where it was converted (Header is left
// as read).
func levelsIn(ls []Level, u string) ([]Level, error) {
	out := slices.Clone(ls)
	for i := range out {
		f, err := volume.UnitScale(out[i].Unit, u)
		if err != nil {
			return nil, err
		}
		for a := range 3 {
			out[i].Spacing[a] *= f
		}
		if out[i].Unit != "" && u != "" {
			out[i].Unit = u
		}
	}
	return out, nil
}

// LevelPath is the path of level l of the multiscale image at image (a
// folder or an http(s) URL): image itself for a level at "." or "",
// image/l.Path otherwise.
func LevelPath(image string, l Level) string {
	if l.Path == "" || l.Path == "." {
		return image
	}
	if volume.IsURL(image) {
		return strings.TrimRight(image, "/") + "/" + l.Path
	}
	return filepath.Join(image, filepath.FromSlash(l.Path))
}

// OpenWith opens a store as a volume with opt.
func OpenWith(path string, opt Options) (volume.File, error) {
	return OpenContext(context.Background(), path, opt)
}

// OpenContext opens a store as a volume with opt; ctx bounds opening and
// every later read of the file (cancelling it ends a remote store's GETs
// in flight, and the reads waiting on them fail with ctx's error).
func OpenContext(ctx context.Context, path string, opt Options) (volume.File, error) {
	n, err := resolve(newSource(ctx, path, opt), path)
	if err != nil {
		return nil, err
	}
	level := 0
	if n.ms != nil && n.named < 0 {
		level = opt.Level
		if opt.TargetSpacing != ([3]float64{}) {
			ls, err := n.levels()
			if err != nil {
				return nil, err
			}
			if ls, err = levelsIn(ls, volume.NormalizeUnit(opt.TargetUnit)); err != nil {
				return nil, fmt.Errorf("%s: target spacing %v %s: %w", path, opt.TargetSpacing, opt.TargetUnit, err)
			}
			level = ChooseLevel(ls, opt.TargetSpacing)
		}
		if level < 0 || level >= len(n.ms.Datasets) {
			return nil, fmt.Errorf("%s: level %d of %d", path, level, len(n.ms.Datasets))
		}
	}
	cb := opt.CacheBytes
	if cb == 0 {
		cb = DefaultCacheBytes
	}
	f, err := n.open(level, cb)
	if err != nil {
		return nil, err
	}
	if opt.Cache != nil {
		f.arr.cache, f.shared = opt.Cache.c, true
	}
	return f, nil
}

// node is what a path resolves to: an array, or an image group (OME-NGFF
// or COSEM) with its multiscales (and the level the path named, −1 when it named the
// group).
type node struct {
	src    *source
	path   string // as given, for errors
	group  string // the image group's directory (ms != nil)
	ms     *multiscale
	msFile string
	array  string // the array's directory (ms == nil or a named level)
	named  int    // level named by path (−1: none)
}

// resolve finds what path is: an array (v2, v3, N5), or an image group.
func resolve(src *source, path string) (*node, error) {
	if _, _, ok := splitStore(path); !ok {
		return nil, fmt.Errorf("%s: not a Zarr or N5 store (a directory ending .zarr or .n5)", path)
	}
	dir := cleanLoc(path)
	if isURL(path) {
		// Over HTTP a directory is only its objects' common prefix:
		// nodeAttrs finds whether metadata is there.
		if err := checkURL(path); err != nil {
			return nil, err
		}
	} else {
		st, err := os.Stat(dir)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			return nil, fmt.Errorf("%s: a store is a directory", path)
		}
	}
	n := &node{src: src, path: path, array: dir, named: -1}
	attrs, kind, file, err := src.nodeAttrs(dir)
	if err != nil {
		return nil, err
	}
	if kind == "group" {
		ms, err := findMultiscales(attrs, file)
		if err != nil {
			return nil, err
		}
		if ms == nil {
			return nil, fmt.Errorf("%s: a group without multiscales (OME-NGFF's or COSEM's): name an array inside it", file)
		}
		n.group, n.ms, n.msFile, n.array = dir, ms, file, ""
		return n, nil
	}
	// An array: is it a level of an image in the directory above?
	parent := parentLoc(dir)
	if _, _, ok := splitStore(parent); ok {
		if pa, pk, pf, err := src.nodeAttrs(parent); err == nil && pk == "group" {
			if ms, err := findMultiscales(pa, pf); err == nil && ms != nil {
				for i, d := range ms.Datasets {
					if cleanLoc(joinLoc(parent, d.Path)) == dir {
						n.group, n.ms, n.msFile, n.named = parent, ms, pf, i
					}
				}
			}
		}
	}
	return n, nil
}

// nodeAttrs reads a directory's node kind ("array" or "group"), its
// attributes and metadata file.
func (s *source) nodeAttrs(dir string) (map[string]json.RawMessage, string, string, error) {
	exists := func(name string) bool { return s.exists(joinLoc(dir, name)) }
	switch {
	case exists("zarr.json"):
		file := joinLoc(dir, "zarr.json")
		var v struct {
			ZarrFormat int                        `json:"zarr_format"`
			NodeType   string                     `json:"node_type"`
			Attrs      map[string]json.RawMessage `json:"attributes"`
		}
		if err := s.readJSON(file, &v); err != nil {
			return nil, "", "", err
		}
		if v.ZarrFormat != 3 {
			return nil, "", "", fmt.Errorf("%s: zarr_format %d, want 3", file, v.ZarrFormat)
		}
		if v.NodeType != "array" && v.NodeType != "group" {
			return nil, "", "", fmt.Errorf("%s: node_type %q", file, v.NodeType)
		}
		return v.Attrs, v.NodeType, file, nil
	case exists(".zarray"):
		return nil, "array", joinLoc(dir, ".zarray"), nil
	case exists(".zgroup") || exists(".zattrs"):
		file := joinLoc(dir, ".zattrs")
		var a map[string]json.RawMessage
		if exists(".zattrs") {
			if err := s.readJSON(file, &a); err != nil {
				return nil, "", "", err
			}
		}
		return a, "group", file, nil
	case exists("attributes.json"):
		file := joinLoc(dir, "attributes.json")
		var a map[string]json.RawMessage
		if err := s.readJSON(file, &a); err != nil {
			return nil, "", "", err
		}
		if _, ok := a["dimensions"]; ok {
			return a, "array", file, nil
		}
		return a, "group", file, nil
	}
	return nil, "", "", fmt.Errorf("%s: %w: no zarr.json, .zarray, .zgroup or attributes.json", dir, fs.ErrNotExist)
}

// readArray reads the metadata of the array in dir, of any format.
func readArray(dir string) (*arrayMeta, error) { return localSource().readArray(dir) }

// readArray reads the metadata of the array in dir through s.
func (s *source) readArray(dir string) (*arrayMeta, error) {
	attrs, kind, file, err := s.nodeAttrs(dir)
	if err != nil {
		return nil, err
	}
	if kind != "array" {
		return nil, fmt.Errorf("%s: a group, not an array", file)
	}
	switch baseLoc(file) {
	case "zarr.json":
		var v v3Node
		if err := s.readJSON(file, &v); err != nil {
			return nil, err
		}
		return readV3(dir, &v)
	case ".zarray":
		return s.readV2(dir)
	}
	return readN5(dir, attrs)
}

// open opens level (of an image; ignored for a plain array or a named
// level) with a cache of cacheBytes (<0: none; the file is only looked at).
func (n *node) open(level int, cacheBytes int64) (*file, error) {
	dir := n.array
	if n.named >= 0 {
		level = n.named
	} else if n.ms != nil {
		dir = joinLoc(n.group, n.ms.Datasets[level].Path)
	}
	m, err := n.src.readArray(dir)
	if err != nil {
		return nil, err
	}
	var roles axisRoles
	scale, trans := []float64(nil), []float64(nil)
	var units []string // per array axis, as written (nil: none)
	unitFile := m.file
	// A COSEM transform: a level of a COSEM multiscale image, or an N5
	// array's own (OpenOrganelle's levels, named by path or copied out of
	// their group). Where an N5 array also has Neuroglancer's
	// pixelResolution, the transform is read and pixelResolution is not
	// looked at: fibsem-tools and cellmap's xarray readers place the
	// voxels by the transform alone, and it is the one that has the
	// translation, the axis names and a unit per axis (pixelResolution is
	// its spacing copied for Neuroglancer, at s0's value on the group),
	// so reading the spacing of one and the translation of the other
	// could mix two different grids.
	var tx *stTransform
	if n.ms != nil && n.ms.cosem {
		if tx, unitFile, err = n.cosemLevel(level, m); err != nil {
			return nil, err
		}
	} else if raw, ok := m.attrs["transform"]; ok && m.n5 && n.ms == nil {
		if tx, err = parseSTTransform(raw, len(m.shape), m.file, "transform"); err != nil {
			return nil, err
		}
	}
	switch {
	case tx != nil:
		if roles, err = rolesFromNames(tx.axes, nil, m.shape, unitFile); err != nil {
			return nil, err
		}
		scale, trans, units = tx.scale, tx.translate, tx.units
	case n.ms != nil:
		if len(n.ms.Axes) != len(m.shape) {
			return nil, fmt.Errorf("%s: %d axes for the %d dimensions of %s", n.msFile, len(n.ms.Axes), len(m.shape), m.file)
		}
		names, types := make([]string, len(m.shape)), make([]string, len(m.shape))
		for i, a := range n.ms.Axes {
			names[i], types[i] = a.Name, a.Type
		}
		if roles, err = rolesFromNames(names, types, m.shape, n.msFile); err != nil {
			return nil, err
		}
		if scale, trans, err = n.ms.scaleTranslation(level, len(m.shape), n.msFile); err != nil {
			return nil, err
		}
		units = make([]string, len(m.shape))
		for i, a := range n.ms.Axes {
			units[i] = a.Unit
		}
		unitFile = n.msFile
	case len(m.dimNames) == len(m.shape) && namedAxes(m.dimNames):
		if roles, err = rolesFromNames(m.dimNames, nil, m.shape, m.file); err != nil {
			return nil, err
		}
	default:
		if roles, err = rolesByRank(m.shape, m.file); err != nil {
			return nil, err
		}
		for _, o := range roles.other {
			if m.shape[o] != 1 {
				return nil, fmt.Errorf("%s: axis %d has length %d", m.file, o, m.shape[o])
			}
		}
	}
	f := &file{arr: &array{m: m, src: n.src}, roles: roles}
	f.arr.cache = newChunkCache(max(cacheBytes, 0))
	h := &f.hdr
	h.Channels = 1
	if roles.channel >= 0 {
		h.Channels = m.shape[roles.channel]
	}
	spacing := [3]float64{1, 1, 1}
	var origin [3]float64
	if m.n5 && scale == nil {
		spacing = n5Resolution(m)
		units = n5Units(m)
	}
	if h.Unit, err = spatialUnit(units, roles, unitFile); err != nil {
		return nil, err
	}
	for k, ax := range roles.spatial {
		h.Shape[k] = 1
		if ax >= 0 {
			h.Shape[k] = m.shape[ax]
			if scale != nil {
				spacing[k], origin[k] = scale[ax], trans[ax]
			}
		}
	}
	// Only addressing is bounded here: a region read decodes only the
	// chunks it overlaps, so a store of 10^11 voxels (OpenOrganelle's s0)
	// opens, and whoever reads a whole volume checks its memory
	// (volume.CheckInMemory).
	if err := volume.CheckValues(h.Shape, h.Channels); err != nil {
		return nil, fmt.Errorf("%s: %w", m.file, err)
	}
	h.Spacing = spacing
	// Affine maps (x, y, z) = (W, H, D) indices: axis-aligned, as OME-NGFF
	// 0.4/0.5 transformations are.
	for i := range 3 {
		h.Affine[i][i] = spacing[2-i]
		h.Affine[i][3] = origin[2-i]
	}
	h.Affine[3][3] = 1
	return f, nil
}

func namedAxes(names []string) bool {
	for _, n := range names {
		if n == "x" {
			return true
		}
	}
	return false
}

// n5Resolution reads N5's pixelResolution ({"dimensions": [...]}) or
// resolution ([...]) attribute, fastest axis first, as (D, H, W) spacing.
func n5Resolution(m *arrayMeta) [3]float64 {
	sp := [3]float64{1, 1, 1}
	var res []float64
	if raw, ok := m.attrs["pixelResolution"]; ok {
		var pr struct {
			Dimensions []float64 `json:"dimensions"`
		}
		if json.Unmarshal(raw, &pr) == nil {
			res = pr.Dimensions
		}
	} else if raw, ok := m.attrs["resolution"]; ok {
		_ = json.Unmarshal(raw, &res)
	}
	n := len(m.shape)
	if len(res) == n && n >= 3 {
		for k := range 3 {
			if r := res[2-k]; r > 0 {
				sp[k] = r
			}
		}
	}
	return sp
}

// n5Units reads the unit of an N5 array's axes, per array axis (slowest
// first, as the array's shape), from the attribute n5Resolution reads the
// spacing from: pixelResolution's "unit" (n5-viewer's, one for every
// axis); with "resolution", the "units" list BigDataViewer and n5-viewer
// write beside it (fastest axis first, as N5 lists everything). A
// pixelResolution without a unit takes the "units" list only when no
// "resolution" is there for the list to belong to. nil when none applies.
func n5Units(m *arrayMeta) []string {
	n := len(m.shape)
	if raw, ok := m.attrs["pixelResolution"]; ok {
		var pr struct {
			Unit string `json:"unit"`
		}
		if json.Unmarshal(raw, &pr) == nil && pr.Unit != "" {
			out := make([]string, n)
			for i := range out {
				out[i] = pr.Unit
			}
			return out
		}
		if _, ok := m.attrs["resolution"]; ok {
			return nil
		}
	}
	var us []string
	if raw, ok := m.attrs["units"]; !ok || json.Unmarshal(raw, &us) != nil || len(us) != n {
		return nil
	}
	out := make([]string, n)
	for i, u := range us {
		out[n-1-i] = u
	}
	return out
}

// spatialUnit is the unit of the spatial axes (volume.NormalizeUnit's
// spelling) of an array whose axes have units (per array axis; nil: none
// written), by volume.AxesUnit's rule: the spatial axes must agree, and
// an axis that states none beside one that does is an error too (OME-NGFF
// says nothing of an axis without a unit); both name file and axes. A
// time axis's unit is not a spatial one and is not looked at.
func spatialUnit(units []string, r axisRoles, file string) (string, error) {
	if units == nil {
		return "", nil
	}
	var us, names []string
	for k, ax := range r.spatial {
		if ax >= 0 {
			us, names = append(us, units[ax]), append(names, "zyx"[k:k+1])
		}
	}
	unit, err := volume.AxesUnit(us, names)
	if err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	return unit, nil
}

// file is an open array as a volume.File.
type file struct {
	arr   *array
	hdr   volume.Header
	roles axisRoles
	// shared: the chunk cache is an Options.Cache, not the file's own.
	shared bool
}

func (f *file) Header() volume.Header { return f.hdr }

// Close drops the file's cached chunks (not those of a shared Cache,
// which other files may be reading).
func (f *file) Close() error {
	if !f.shared {
		f.arr.cache.reset()
	}
	return nil
}

// ChunkShape implements volume.Chunked: the spatial shape (D, H, W) of the
// chunks the array is read by (the inner chunks of a sharded array); 1
// along an axis the array lacks.
func (f *file) ChunkShape() [3]int {
	var s [3]int
	for k, ax := range f.roles.spatial {
		s[k] = 1
		if ax >= 0 {
			s[k] = f.arr.m.chunks[ax]
		}
	}
	return s
}

// region returns the array region and destination strides of box in
// channel c.
func (f *file) region(box volume.Box, c int) (lo, hi, strides []int) {
	n := len(f.arr.m.shape)
	lo, hi, strides = make([]int, n), make([]int, n), make([]int, n)
	for d := range n {
		hi[d] = 1
	}
	sz := box.Size()
	st := [3]int{sz[1] * sz[2], sz[2], 1}
	for k, ax := range f.roles.spatial {
		if ax >= 0 {
			lo[ax], hi[ax], strides[ax] = box.Lo[k], box.Hi[k], st[k]
		}
	}
	if ch := f.roles.channel; ch >= 0 {
		lo[ch], hi[ch] = c, c+1
	}
	return lo, hi, strides
}

// check refuses a box outside the volume, and one too large to decode
// into memory at once (a whole read of a huge store).
func (f *file) check(box volume.Box) error {
	if box.Empty() || !volume.Whole(f.hdr.Shape).Contains(box) {
		return fmt.Errorf("zarr: %s: region %v outside the volume %v", f.arr.name(), box, f.hdr.Shape)
	}
	if err := volume.CheckInMemory(box.Size(), f.hdr.Channels); err != nil {
		return fmt.Errorf("zarr: %s: region %v..%v of the volume %v: %w", f.arr.name(), box.Lo, box.Hi, f.hdr.Shape, err)
	}
	return nil
}

// ReadRegion implements volume.File: only the chunks box overlaps are
// read and decoded.
func (f *file) ReadRegion(box volume.Box, dst [][]float32) error {
	if len(dst) != f.hdr.Channels {
		return fmt.Errorf("zarr: %s: %d destinations for %d channels", f.arr.name(), len(dst), f.hdr.Channels)
	}
	if err := f.check(box); err != nil {
		return err
	}
	for c := range dst {
		if len(dst[c]) != box.Voxels() {
			return fmt.Errorf("zarr: %s: a destination of %d values for a region of %d", f.arr.name(), len(dst[c]), box.Voxels())
		}
		lo, hi, st := f.region(box, c)
		if err := f.arr.read(lo, hi, dst[c], st); err != nil {
			return err
		}
	}
	return nil
}

// ReadLabels implements volume.File: every voxel must be an integer in
// 0..255.
func (f *file) ReadLabels(box volume.Box, dst []uint8) error {
	if f.hdr.Channels != 1 {
		return fmt.Errorf("zarr: %s: a label map with %d channels, want one", f.arr.name(), f.hdr.Channels)
	}
	if err := f.check(box); err != nil {
		return err
	}
	if len(dst) != box.Voxels() {
		return fmt.Errorf("zarr: %s: a destination of %d values for a region of %d", f.arr.name(), len(dst), box.Voxels())
	}
	buf := make([]float32, len(dst))
	lo, hi, st := f.region(box, 0)
	if err := f.arr.read(lo, hi, buf, st); err != nil {
		return err
	}
	return volume.ToLabels(dst, buf, "zarr: "+f.arr.name())
}
