// Package store is voxtrain's prepared on-disk dataset: every case decoded
// once to float32 (after the deterministic preprocessing), cut into cubic
// chunks, each chunk compressed on its own, with an index. Reading a patch
// decompresses only the chunks it overlaps.
//
// Layout of a store folder:
//
//	index.json     store version, preprocessing fingerprint, chunk edge,
//	               codec, and per case: its data file, shape, and the size,
//	               mtime and SHA-256 of every source file it was made from
//	<case>.vxs     one file per case (format below)
//
// A case file is little-endian:
//
//	"VXSTORE1"
//	u32 version (1), D, H, W, channels, has-label, chunk edge, codec
//	    (1 = S2, 2 = zstd, +16 byte-shuffled; 3 = raw), len(extra), chunks
//	    per array
//	table: for each array (image channels, then the label), for each chunk
//	    (z slowest, x fastest): u64 offset, u32 compressed length
//	extra: opaque bytes the writer attached (voxtrain: the foreground index)
//	chunk data; an edge chunk holds only the voxels inside the volume
//
// Image chunks hold float32, the label chunk uint8 class indices.
//
// The raw codec stores chunks uncompressed (4 bytes a voxel), 64-byte
// aligned, and reads them through a read-only memory map where the system
// has one: a patch read is then a copy of the patch's rows straight from
// the page cache, with no decompression and no read buffer. It trades disk
// (and page cache) for speed, as nnU-Net's unpacked .npy files do.
package store

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"unsafe"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/voxtrain/voxtrain/internal/atomicfile"
)

// Version is the store format version.
const Version = 1

// Codec names.
const (
	CodecS2   = "s2"
	CodecZstd = "zstd"
)

const magic = "VXSTORE1"

// Index is index.json.
type Index struct {
	Version int `json:"version"`
	// Prep is the preprocessing configuration the cases were made with,
	// and PrepHash its SHA-256: a different configuration makes every case
	// stale.
	Prep     json.RawMessage `json:"preprocessing"`
	PrepHash string          `json:"preprocessing_sha256"`
	Chunk    int             `json:"chunk"`
	Codec    string          `json:"codec"`
	// Cases maps case ID to its entry.
	Cases map[string]*Entry `json:"cases"`
}

// Entry describes one case in the store.
type Entry struct {
	File     string   `json:"file"`
	Shape    [3]int   `json:"shape"`
	Channels int      `json:"channels"`
	HasLabel bool     `json:"has_label"`
	Sources  []Source `json:"sources"`
	// RawBytes and StoredBytes are the voxel bytes before and after
	// compression.
	RawBytes    int64 `json:"raw_bytes"`
	StoredBytes int64 `json:"stored_bytes"`
}

// Source identifies one source file by size, modification time and
// content hash.
type Source struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	ModTime int64  `json:"mtime_ns"`
	SHA256  string `json:"sha256"`
}

// HashPrep returns the fingerprint of a preprocessing configuration.
func HashPrep(prep []byte) string {
	h := sha256.Sum256(prep)
	return hex.EncodeToString(h[:])
}

// ReadIndex reads dir/index.json (os.ErrNotExist when there is none).
func ReadIndex(dir string) (*Index, error) {
	path := filepath.Join(dir, "index.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read store index: %w", err)
	}
	var ix Index
	if err := json.Unmarshal(b, &ix); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	if ix.Version != Version {
		return nil, fmt.Errorf("%s: store version %d, this build reads %d (run train prepare again)", path, ix.Version, Version)
	}
	if ix.Cases == nil {
		ix.Cases = map[string]*Entry{}
	}
	return &ix, nil
}

// Stat describes a source file now, hashing it only when size or mtime
// differ from known (nil: always hash).
func Stat(path string, known *Source) (Source, error) {
	st, err := os.Stat(path)
	if err != nil {
		return Source{}, err
	}
	s := Source{Path: path, Size: st.Size(), ModTime: st.ModTime().UnixNano()}
	if known != nil && known.Path == path && known.Size == s.Size && known.ModTime == s.ModTime {
		s.SHA256 = known.SHA256
		return s, nil
	}
	s.SHA256, err = hashFile(path)
	return s, err
}

func hashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Current reports whether entry e was made from exactly these files: the
// same paths, and for each the same size and mtime, or (after a touch or
// a copy) the same content hash. It returns the refreshed sources (new
// mtimes of unchanged content) and, when stale, why.
func Current(e *Entry, files []string) (ok bool, now []Source, why string, err error) {
	if e == nil {
		return false, nil, "not in the store", nil
	}
	if len(e.Sources) != len(files) {
		return false, nil, "its file list changed", nil
	}
	now = make([]Source, len(files))
	for i, f := range files {
		k := e.Sources[i]
		if k.Path != f {
			return false, nil, fmt.Sprintf("file %s replaced %s", f, k.Path), nil
		}
		s, err := Stat(f, &k)
		if err != nil {
			return false, nil, "", err
		}
		if s.SHA256 != k.SHA256 {
			return false, nil, fmt.Sprintf("%s changed (size %d→%d, content hash differs)", f, k.Size, s.Size), nil
		}
		now[i] = s
	}
	return true, now, "", nil
}

// Writer adds cases to a store folder. Put is safe for concurrent use.
type Writer struct {
	dir   string
	mu    sync.Mutex
	ix    *Index
	enc   *zstd.Encoder
	dirty bool // the index differs from index.json
}

// Codec names with a byte-shuffle filter: float32 chunks are stored as
// four byte planes (all first bytes, then all second bytes, ...) before
// compression, as Blosc's shuffle does.
const (
	CodecS2Shuffle   = "s2-shuffle"
	CodecZstdShuffle = "zstd-shuffle"
)

// CodecRaw stores chunks uncompressed and reads them through a memory map
// (see the package documentation).
const CodecRaw = "raw"

// codecID is the case-file code of a codec name: 1 S2, 2 zstd, +16 for
// the shuffle filter.
func codecID(name string) (uint32, bool) {
	switch name {
	case CodecRaw:
		return codecRawID, true
	case CodecS2:
		return 1, true
	case CodecZstd:
		return 2, true
	case CodecS2Shuffle:
		return 1 | shuffleBit, true
	case CodecZstdShuffle:
		return 2 | shuffleBit, true
	}
	return 0, false
}

const shuffleBit = 16

// codecRawID is the raw codec's case-file code.
const codecRawID = 3

// casePerm is the mode of case files: owner read and write only, the mode
// they had when the writer made them with os.CreateTemp.
const casePerm = 0o600

// rawAlign aligns a raw case file's first chunk (and so every float32
// chunk, whose sizes are multiples of 4) for in-place float32 views.
const rawAlign = 64

// NewWriter opens dir for writing cases made with the given preprocessing
// (JSON), chunk edge and codec. Cases already there are kept only when the
// store was made with the same preprocessing, chunk and codec.
func NewWriter(dir string, prep []byte, chunk int, codec string) (*Writer, error) {
	if chunk < 1 {
		return nil, fmt.Errorf("store: chunk edge %d", chunk)
	}
	id, ok := codecID(codec)
	if !ok {
		return nil, fmt.Errorf("store: codec %q is not s2, zstd, s2-shuffle, zstd-shuffle or raw", codec)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	hash := HashPrep(prep)
	ix, err := ReadIndex(dir)
	dirty := false
	if err != nil || ix.PrepHash != hash || ix.Chunk != chunk || ix.Codec != codec {
		ix, dirty = &Index{Cases: map[string]*Entry{}}, true
	}
	ix.Version, ix.Prep, ix.PrepHash, ix.Chunk, ix.Codec = Version, json.RawMessage(prep), hash, chunk, codec
	w := &Writer{dir: dir, ix: ix, dirty: dirty}
	if id&0xf == 2 {
		w.enc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
	}
	return w, nil
}

// Entry returns the index entry of case id (nil when absent).
func (w *Writer) Entry(id string) *Entry {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ix.Cases[id]
}

// Touch records refreshed source descriptions for an unchanged case.
func (w *Writer) Touch(id string, now []Source) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e := w.ix.Cases[id]; e != nil {
		for i := range now {
			if i >= len(e.Sources) || now[i] != e.Sources[i] {
				w.dirty = true
			}
		}
		e.Sources = now
	}
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// Put writes case id: image channels (float32, D×H×W each), the label
// (uint8, or nil) and extra bytes, made from the given source files
// (described with Stat before they were read, so a file that changes while
// it is being read leaves the case stale rather than wrongly current). The
// case file is written to a temporary name and renamed into place.
func (w *Writer) Put(id string, srcs []Source, shape [3]int, image [][]float32, label []uint8, extra []byte) error {
	vox := shape[0] * shape[1] * shape[2]
	for c, im := range image {
		if len(im) != vox {
			return fmt.Errorf("store: case %s: channel %d has %d voxels, shape %v needs %d", id, c, len(im), shape, vox)
		}
	}
	if label != nil && len(label) != vox {
		return fmt.Errorf("store: case %s: label has %d voxels, shape %v needs %d", id, len(label), shape, vox)
	}
	name := unsafeName.ReplaceAllString(id, "_") + ".vxs"
	path := filepath.Join(w.dir, name)
	raw, stored, err := w.writeCase(path, shape, image, label, extra)
	if err != nil {
		return fmt.Errorf("store: case %s: %w", id, err)
	}
	w.mu.Lock()
	w.ix.Cases[id] = &Entry{File: name, Shape: shape, Channels: len(image), HasLabel: label != nil,
		Sources: srcs, RawBytes: raw, StoredBytes: stored}
	w.dirty = true
	w.mu.Unlock()
	return nil
}

// Remove drops cases not in keep from the index and deletes their files.
func (w *Writer) Remove(keep map[string]bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, e := range w.ix.Cases {
		if !keep[id] {
			os.Remove(filepath.Join(w.dir, e.File))
			delete(w.ix.Cases, id)
			w.dirty = true
		}
	}
}

// Close writes index.json (atomically) if anything changed, so opening an
// up-to-date store writes nothing.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.enc != nil {
		w.enc.Close()
	}
	if !w.dirty {
		return nil
	}
	b, err := json.MarshalIndent(w.ix, "", " ")
	if err != nil {
		return err
	}
	idx := filepath.Join(w.dir, "index.json")
	if err := atomicfile.WriteFile(idx, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", idx, err)
	}
	return nil
}

// grid is the chunk grid of a volume.
type grid struct {
	shape [3]int
	chunk int
	n     [3]int // chunks per axis
}

func newGrid(shape [3]int, chunk int) grid {
	g := grid{shape: shape, chunk: chunk}
	for i := range g.n {
		g.n[i] = (shape[i] + chunk - 1) / chunk
	}
	return g
}

func (g grid) count() int { return g.n[0] * g.n[1] * g.n[2] }

// box returns chunk (i, j, k)'s voxel range.
func (g grid) box(i, j, k int) (lo, hi [3]int) {
	lo = [3]int{i * g.chunk, j * g.chunk, k * g.chunk}
	for a := range 3 {
		hi[a] = min(lo[a]+g.chunk, g.shape[a])
	}
	return lo, hi
}

func (w *Writer) writeCase(path string, shape [3]int, image [][]float32, label []uint8, extra []byte) (raw, stored int64, err error) {
	g := newGrid(shape, w.ix.Chunk)
	narr := len(image)
	if label != nil {
		narr++
	}
	codec, _ := codecID(w.ix.Codec)
	hasLabel := uint32(0)
	if label != nil {
		hasLabel = 1
	}
	head := []uint32{Version, uint32(shape[0]), uint32(shape[1]), uint32(shape[2]), uint32(len(image)),
		hasLabel, uint32(w.ix.Chunk), codec, uint32(len(extra)), uint32(g.count())}
	headLen := int64(len(magic) + 4*len(head) + narr*g.count()*12 + len(extra))
	if codec == codecRawID {
		headLen = (headLen + rawAlign - 1) / rawAlign * rawAlign
	}

	tmp, err := atomicfile.Create(path, casePerm)
	if err != nil {
		return 0, 0, err
	}
	defer tmp.Close() // discards the temporary file unless committed
	if _, err = tmp.Seek(headLen, io.SeekStart); err != nil {
		return 0, 0, err
	}
	bw := bufio.NewWriterSize(tmp, 1<<20)
	table := make([]byte, 0, narr*g.count()*12)
	off := headLen
	cbuf := make([]float32, g.chunk*g.chunk*g.chunk)
	lbuf := make([]uint8, g.chunk*g.chunk*g.chunk)
	var sbuf []byte
	var enc []byte
	for a := 0; a < narr; a++ {
		for i := 0; i < g.n[0]; i++ {
			for j := 0; j < g.n[1]; j++ {
				for k := 0; k < g.n[2]; k++ {
					lo, hi := g.box(i, j, k)
					var b []byte
					if a < len(image) {
						n := gather(cbuf, image[a], shape, lo, hi)
						b = f32bytes(cbuf[:n])
						if codec&shuffleBit != 0 {
							sbuf = shuffle(sbuf, b)
							b = sbuf
						}
					} else {
						n := gather(lbuf, label, shape, lo, hi)
						b = lbuf[:n]
					}
					raw += int64(len(b))
					switch {
					case codec == codecRawID:
						enc = b
					case w.enc != nil:
						enc = w.enc.EncodeAll(b, enc[:0])
					default:
						enc = s2.Encode(enc[:cap(enc)], b)
					}
					if _, err = bw.Write(enc); err != nil {
						return 0, 0, err
					}
					table = binary.LittleEndian.AppendUint64(table, uint64(off))
					table = binary.LittleEndian.AppendUint32(table, uint32(len(enc)))
					off += int64(len(enc))
					stored += int64(len(enc))
				}
			}
		}
	}
	if err = bw.Flush(); err != nil {
		return 0, 0, err
	}
	hb := append([]byte(magic), make([]byte, 0, 4*len(head))...)
	for _, v := range head {
		hb = binary.LittleEndian.AppendUint32(hb, v)
	}
	hb = append(append(hb, table...), extra...)
	if _, err = tmp.WriteAt(hb, 0); err != nil {
		return 0, 0, err
	}
	if err = tmp.Commit(); err != nil {
		return 0, 0, err
	}
	return raw, stored, nil
}

// shuffle writes the bytes of b's float32s as four planes into dst.
func shuffle(dst, b []byte) []byte {
	n := len(b) / 4
	if cap(dst) < len(b) {
		dst = make([]byte, len(b))
	}
	dst = dst[:len(b)]
	for i := 0; i < n; i++ {
		dst[i], dst[n+i], dst[2*n+i], dst[3*n+i] = b[4*i], b[4*i+1], b[4*i+2], b[4*i+3]
	}
	return dst
}

// gather copies the voxels of box [lo, hi) of vol (shape) into dst,
// packed, and returns their count.
func gather[T any](dst, vol []T, shape, lo, hi [3]int) int {
	n := 0
	w := hi[2] - lo[2]
	for z := lo[0]; z < hi[0]; z++ {
		for y := lo[1]; y < hi[1]; y++ {
			s := (z*shape[1]+y)*shape[2] + lo[2]
			copy(dst[n:n+w], vol[s:s+w])
			n += w
		}
	}
	return n
}

// f32bytes views float32s as their little-endian bytes.
func f32bytes(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	if !littleEndian {
		panic("store: big-endian hosts are not supported")
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f))
}

var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// Store reads a prepared store. Its methods are safe for concurrent use.
type Store struct {
	dir   string
	ix    *Index
	mu    sync.Mutex
	cases map[string]*Case
}

// Open opens the store in dir.
func Open(dir string) (*Store, error) {
	ix, err := ReadIndex(dir)
	if err != nil {
		return nil, err
	}
	return &Store{dir: dir, ix: ix, cases: map[string]*Case{}}, nil
}

// Index returns the store's index (read-only).
func (s *Store) Index() *Index { return s.ix }

// IDs returns the case IDs in the store, sorted.
func (s *Store) IDs() []string {
	ids := make([]string, 0, len(s.ix.Cases))
	for id := range s.ix.Cases {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Case opens case id's data file (once; later calls return the same Case).
func (s *Store) Case(id string) (*Case, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.cases[id]; c != nil {
		return c, nil
	}
	e := s.ix.Cases[id]
	if e == nil {
		return nil, fmt.Errorf("store %s: no case %q", s.dir, id)
	}
	c, err := openCase(filepath.Join(s.dir, e.File), e)
	if err != nil {
		return nil, err
	}
	s.cases[id] = c
	return c, nil
}

// Close closes every open case file.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, c := range s.cases {
		errs = append(errs, c.close())
	}
	s.cases = map[string]*Case{}
	return errors.Join(errs...)
}

// Case is one case's data file, open for patch reads.
type Case struct {
	// Shape is (D, H, W); Channels the image channels.
	Shape    [3]int
	Channels int
	HasLabel bool
	// Extra is the opaque data the writer attached.
	Extra []byte

	path  string
	f     *os.File
	g     grid
	codec uint32
	off   []int64 // per array, per chunk
	size  []uint32
	// mm maps the whole file read-only (raw codec, where mmap exists).
	mm []byte
}

func openCase(path string, e *Entry) (*Case, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	c, err := readCaseHeader(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	if c.Shape != e.Shape || c.Channels != e.Channels || c.HasLabel != e.HasLabel {
		f.Close()
		return nil, fmt.Errorf("store: %s does not match its index entry (shape %v vs %v)", path, c.Shape, e.Shape)
	}
	if c.codec == codecRawID {
		if c.mm, err = mapFile(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("store: map %s: %w", path, err)
		}
	}
	return c, nil
}

// close releases the case's file and mapping.
func (c *Case) close() error {
	var err error
	if c.mm != nil {
		err = unmapFile(c.mm)
		c.mm = nil
	}
	return errors.Join(err, c.f.Close())
}

func readCaseHeader(f *os.File, path string) (*Case, error) {
	bad := func(what string) error { return fmt.Errorf("store: %s: %s (run train prepare again)", path, what) }
	br := bufio.NewReader(f)
	m := make([]byte, len(magic))
	if _, err := io.ReadFull(br, m); err != nil || string(m) != magic {
		return nil, bad("not a voxtrain store case file")
	}
	var head [10]uint32
	if err := binary.Read(br, binary.LittleEndian, &head); err != nil {
		return nil, bad("truncated header")
	}
	if head[0] != Version {
		return nil, bad(fmt.Sprintf("format version %d", head[0]))
	}
	c := &Case{Shape: [3]int{int(head[1]), int(head[2]), int(head[3])}, Channels: int(head[4]),
		HasLabel: head[5] == 1, codec: head[7], path: path, f: f}
	chunk := int(head[6])
	if chunk < 1 || c.Channels < 1 || c.Shape[0] < 1 || c.Shape[1] < 1 || c.Shape[2] < 1 || (c.codec&^shuffleBit != 1 && c.codec&^shuffleBit != 2 && c.codec != codecRawID) {
		return nil, bad("bad header values")
	}
	c.g = newGrid(c.Shape, chunk)
	if int(head[9]) != c.g.count() {
		return nil, bad("chunk count does not match the shape")
	}
	narr := c.Channels
	if c.HasLabel {
		narr++
	}
	n := narr * c.g.count()
	tb := make([]byte, 12*n)
	if _, err := io.ReadFull(br, tb); err != nil {
		return nil, bad("truncated chunk table")
	}
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	c.off, c.size = make([]int64, n), make([]uint32, n)
	for i := 0; i < n; i++ {
		c.off[i] = int64(binary.LittleEndian.Uint64(tb[12*i:]))
		c.size[i] = binary.LittleEndian.Uint32(tb[12*i+8:])
		if c.off[i] < 0 || c.off[i]+int64(c.size[i]) > st.Size() {
			return nil, bad("chunk table points past the end of the file")
		}
		arr := i / c.g.count()
		if c.codec == codecRawID && (int(c.size[i]) != c.chunkBytes(arr, i%c.g.count()) || (arr < c.Channels && c.off[i]%4 != 0)) {
			return nil, bad("raw chunk of the wrong size or alignment")
		}
	}
	c.Extra = make([]byte, head[8])
	if _, err := io.ReadFull(br, c.Extra); err != nil {
		return nil, bad("truncated extra data")
	}
	return c, nil
}

// Scratch is one reader goroutine's reusable buffers; the zero value is
// ready. Not safe for concurrent use.
type Scratch struct {
	comp []byte
	raw  []byte
	dec  *zstd.Decoder
	// Chunks counts chunks decompressed (or, raw, copied from), Bytes
	// their raw bytes.
	Chunks, Bytes int64
}

// ReadRegion fills the box [lo, hi) (D, H, W) of every image channel into
// img (one slice per channel, box-sized, W fastest) and of the label into
// lbl (nil: skip the label), decompressing only the chunks the box
// overlaps.
func (c *Case) ReadRegion(lo, hi [3]int, img [][]float32, lbl []uint8, sc *Scratch) error {
	var bs [3]int
	for a := range 3 {
		if lo[a] < 0 || hi[a] > c.Shape[a] || lo[a] >= hi[a] {
			return fmt.Errorf("store: %s: region [%v, %v) is outside the volume %v", c.path, lo, hi, c.Shape)
		}
		bs[a] = hi[a] - lo[a]
	}
	vox := bs[0] * bs[1] * bs[2]
	if len(img) != c.Channels {
		return fmt.Errorf("store: %s: %d channel buffers for %d channels", c.path, len(img), c.Channels)
	}
	for ch := range img {
		if len(img[ch]) != vox {
			return fmt.Errorf("store: %s: channel buffer of %d voxels for a region of %d", c.path, len(img[ch]), vox)
		}
	}
	if lbl != nil && (!c.HasLabel || len(lbl) != vox) {
		return fmt.Errorf("store: %s: label buffer of %d voxels for a region of %d (has label: %v)", c.path, len(lbl), vox, c.HasLabel)
	}
	g := c.g
	var clo, chi [3]int
	for a := range 3 {
		clo[a] = lo[a] / g.chunk
		chi[a] = (hi[a] - 1) / g.chunk
	}
	narr := c.Channels
	if lbl != nil {
		narr++
	}
	for arr := 0; arr < narr; arr++ {
		for i := clo[0]; i <= chi[0]; i++ {
			for j := clo[1]; j <= chi[1]; j++ {
				// Chunks along x of one row are contiguous in the file:
				// one read for the whole run (none from a memory map).
				base := arr*g.count() + (i*g.n[1]+j)*g.n[2]
				first, last := base+clo[2], base+chi[2]
				start := c.off[first]
				end := c.off[last] + int64(c.size[last])
				buf := c.mm
				if buf != nil {
					buf = buf[start:end]
				} else {
					if int64(cap(sc.comp)) < end-start {
						sc.comp = make([]byte, end-start)
					}
					buf = sc.comp[:end-start]
					if _, err := c.f.ReadAt(buf, start); err != nil {
						return fmt.Errorf("store: read %s: %w", c.path, err)
					}
				}
				for k := clo[2]; k <= chi[2]; k++ {
					idx := base + k
					o := c.off[idx] - start
					data := buf[o : o+int64(c.size[idx])]
					if c.codec == codecRawID {
						sc.Chunks++
						sc.Bytes += int64(len(data))
					} else {
						var err error
						data, err = sc.decode(c.codec&^shuffleBit, data, c.chunkBytes(arr, idx-arr*g.count()))
						if err != nil {
							return fmt.Errorf("store: %s: chunk %d of array %d: %w", c.path, idx-arr*g.count(), arr, err)
						}
					}
					clo3, chi3 := g.box(i, j, k)
					switch {
					case arr < c.Channels && c.codec&shuffleBit != 0:
						scatterShuffled(img[arr], bs, lo, hi, data, clo3, chi3)
					case arr < c.Channels:
						scatter(img[arr], bs, lo, hi, bytesF32(data), clo3, chi3)
					default:
						scatter(lbl, bs, lo, hi, data, clo3, chi3)
					}
				}
			}
		}
	}
	return nil
}

// chunkBytes is the raw size of chunk ci (z slowest, x fastest) of array
// arr.
func (c *Case) chunkBytes(arr, ci int) int {
	k := ci % c.g.n[2]
	j := ci / c.g.n[2] % c.g.n[1]
	i := ci / (c.g.n[1] * c.g.n[2])
	lo, hi := c.g.box(i, j, k)
	n := (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2])
	if arr < c.Channels {
		return 4 * n
	}
	return n
}

func (sc *Scratch) decode(codec uint32, src []byte, want int) ([]byte, error) {
	if cap(sc.raw) < want {
		sc.raw = make([]byte, want)
	}
	var out []byte
	var err error
	if codec == 2 {
		if sc.dec == nil {
			sc.dec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
			if err != nil {
				return nil, err
			}
		}
		out, err = sc.dec.DecodeAll(src, sc.raw[:0])
	} else {
		out, err = s2.Decode(sc.raw[:want], src)
	}
	if err != nil {
		return nil, err
	}
	if len(out) != want {
		return nil, fmt.Errorf("decompressed %d bytes, want %d", len(out), want)
	}
	sc.Chunks++
	sc.Bytes += int64(want)
	return out, nil
}

// scatter copies the part of chunk [clo, chi) (data packed, W fastest)
// that lies in the region [lo, hi) into dst (region-shaped bs).
func scatter[T any](dst []T, bs, lo, hi [3]int, data []T, clo, chi [3]int) {
	var a, b [3]int
	for i := range 3 {
		a[i] = max(lo[i], clo[i])
		b[i] = min(hi[i], chi[i])
	}
	cw, ch := chi[2]-clo[2], chi[1]-clo[1]
	w := b[2] - a[2]
	for z := a[0]; z < b[0]; z++ {
		for y := a[1]; y < b[1]; y++ {
			s := ((z-clo[0])*ch+(y-clo[1]))*cw + (a[2] - clo[2])
			d := ((z-lo[0])*bs[1]+(y-lo[1]))*bs[2] + (a[2] - lo[2])
			copy(dst[d:d+w], data[s:s+w])
		}
	}
}

// scatterShuffled is scatter for a byte-shuffled float32 chunk: it
// reassembles each float from its four planes on the way.
func scatterShuffled(dst []float32, bs, lo, hi [3]int, data []byte, clo, chi [3]int) {
	var a, b [3]int
	for i := range 3 {
		a[i] = max(lo[i], clo[i])
		b[i] = min(hi[i], chi[i])
	}
	n := len(data) / 4
	p0, p1, p2, p3 := data[:n], data[n:2*n], data[2*n:3*n], data[3*n:]
	cw, ch := chi[2]-clo[2], chi[1]-clo[1]
	w := b[2] - a[2]
	for z := a[0]; z < b[0]; z++ {
		for y := a[1]; y < b[1]; y++ {
			s := ((z-clo[0])*ch+(y-clo[1]))*cw + (a[2] - clo[2])
			d := ((z-lo[0])*bs[1]+(y-lo[1]))*bs[2] + (a[2] - lo[2])
			out := dst[d : d+w]
			q0, q1, q2, q3 := p0[s:s+w], p1[s:s+w], p2[s:s+w], p3[s:s+w]
			q1, q2, q3 = q1[:len(q0)], q2[:len(q0)], q3[:len(q0)] // one bounds check for all
			for x, b0 := range q0 {
				out[x] = math.Float32frombits(uint32(b0) | uint32(q1[x])<<8 | uint32(q2[x])<<16 | uint32(q3[x])<<24)
			}
		}
	}
}

func bytesF32(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

// DecodeAll reads a whole case (for validation and tests): image channels
// and label (nil without one).
func (c *Case) DecodeAll(sc *Scratch) ([][]float32, []uint8, error) {
	vox := c.Shape[0] * c.Shape[1] * c.Shape[2]
	img := make([][]float32, c.Channels)
	for i := range img {
		img[i] = make([]float32, vox)
	}
	var lbl []uint8
	if c.HasLabel {
		lbl = make([]uint8, vox)
	}
	err := c.ReadRegion([3]int{}, c.Shape, img, lbl, sc)
	return img, lbl, err
}
