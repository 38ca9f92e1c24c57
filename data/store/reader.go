package store

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

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
