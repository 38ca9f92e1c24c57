package store

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/voxtrain/voxtrain/internal/atomicfile"
)

// Writer adds cases to a store folder. Put is safe for concurrent use.
// A Writer holds a lock on the folder until Close (see lockDir).
type Writer struct {
	dir    string
	mu     sync.Mutex
	ix     *Index
	enc    *zstd.Encoder
	dirty  bool // the index differs from index.json
	unlock func()
}

// Store files and folders are made with the umask's permissions (as
// os.WriteFile and os.MkdirAll with these modes): a store is data that
// other users' runs read, and the umask is how its owner says who may
// (0o644 files and 0o755 folders under the usual umask 022, group-writable
// ones under 002).
const (
	filePerm = 0o666
	dirPerm  = 0o777
)

// staleTemp is the age after which a temporary file in a store folder is
// taken for the leftover of a writer that died (killed, out of memory,
// a power cut), even while other writers are at work: a live writer
// writes its file within seconds to minutes.
const staleTemp = time.Hour

// NewWriter opens dir for writing cases made with the given preprocessing
// (JSON), chunk edge and codec. Cases already there are kept only when the
// store was made with the same preprocessing, chunk and codec. It locks
// the folder until Close and removes the temporary files of writers that
// died (see sweepTemps).
func NewWriter(dir string, prep []byte, chunk int, codec string) (*Writer, error) {
	if chunk < 1 {
		return nil, fmt.Errorf("store: chunk edge %d", chunk)
	}
	id, ok := codecID(codec)
	if !ok {
		return nil, fmt.Errorf("store: codec %q is not s2, zstd, s2-shuffle, zstd-shuffle or raw", codec)
	}
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	unlock, err := lockDir(dir, func(sole bool) { sweepTemps(dir, sole) })
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	hash := HashPrep(prep)
	ix, err := ReadIndex(dir)
	dirty := false
	if err != nil || ix.PrepHash != hash || ix.Chunk != chunk || ix.Codec != codec {
		ix, dirty = &Index{Cases: map[string]*Entry{}}, true
	}
	ix.Version, ix.Prep, ix.PrepHash, ix.Chunk, ix.Codec = Version, json.RawMessage(prep), hash, chunk, codec
	w := &Writer{dir: dir, ix: ix, dirty: dirty, unlock: unlock}
	if id&0xf == 2 {
		w.enc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
		if err != nil {
			unlock()
			return nil, fmt.Errorf("store: %w", err)
		}
	}
	return w, nil
}

// sweepTemps removes what writers that died left in dir: the temporary
// files (atomicfile.TempPrefix) of case files and of index.json when sole
// (no other writer is at work, so none of them is being written), and any
// temporary file older than staleTemp in any case. Failures are ignored:
// a leftover that cannot be removed (another user's, in a folder this one
// may not write) harms nothing but disk space.
func sweepTemps(dir string, sole bool) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, de := range des {
		name := de.Name()
		if !strings.HasPrefix(name, atomicfile.TempPrefix) || de.IsDir() {
			continue
		}
		// Other temporary files here (ct statistics, splits) belong to
		// writers that do not take the lock: only stale ones go.
		ours := strings.Contains(name, ".vxs-") || strings.HasPrefix(name, atomicfile.TempPrefix+"index.json-")
		if !(sole && ours) {
			fi, err := de.Info()
			if err != nil || time.Since(fi.ModTime()) < staleTemp {
				continue
			}
		}
		os.Remove(filepath.Join(dir, name))
	}
}

// Entry returns the index entry of case id (nil when absent).
func (w *Writer) Entry(id string) *Entry {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ix.Cases[id]
}

// Touch records refreshed source descriptions for an unchanged case.
func (w *Writer) Touch(id string, now []SourceFile) {
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
func (w *Writer) Put(id string, srcs []SourceFile, shape [3]int, image [][]float32, label []uint8, extra []byte) error {
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
// up-to-date store writes nothing, and releases the folder's lock.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.enc != nil {
		w.enc.Close()
		w.enc = nil
	}
	defer func() {
		if w.unlock != nil {
			w.unlock()
			w.unlock = nil
		}
	}()
	if !w.dirty {
		return nil
	}
	b, err := json.MarshalIndent(w.ix, "", " ")
	if err != nil {
		return err
	}
	idx := filepath.Join(w.dir, "index.json")
	if err := atomicfile.WriteFileUmask(idx, append(b, '\n'), filePerm); err != nil {
		return fmt.Errorf("write %s: %w", idx, err)
	}
	return nil
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

	tmp, err := atomicfile.CreateUmask(path, filePerm)
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
