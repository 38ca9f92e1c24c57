package zarr

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// maxChunkBytes bounds a decoded chunk (or shard index): a chunk larger
// than this is refused rather than allocated.
const maxChunkBytes = 1 << 30

// arrayMeta is what reading an array needs, from any of the metadata
// formats: its shape, the grid it is read by (the inner chunks of a
// sharded array), the element type and fill, where a chunk's bytes are
// and how they are decoded.
type arrayMeta struct {
	dir    string // the array's directory
	file   string // its metadata file, for errors
	shape  []int
	chunks []int // the read grid
	fill   float32
	codec  chunkCodec
	// key names the file of a chunk (of a shard when sharded), relative
	// to dir.
	key   func(idx []int) string
	shard *shardSpec
	n5    bool
	// dimNames are v3's dimension_names (nil when absent).
	dimNames []string
	// attrs are the array's attributes (.zattrs, v3 attributes, N5's
	// attributes.json).
	attrs map[string]json.RawMessage
}

// chunkCodec decodes a chunk's stored bytes: bytes-to-bytes steps in
// decoding order, then an array of dt stored in C order over the chunk's
// axes permuted by perm (stored axis i is array axis perm[i]).
type chunkCodec struct {
	bytes []bytesCodec
	dt    dtype
	perm  []int
}

// checkGrid validates a shape and its chunk grid: every chunk axis > 0 and
// a chunk no larger than maxChunkBytes decoded.
func checkGrid(shape, chunks []int, size int, what string) error {
	if len(shape) == 0 || len(shape) > 8 {
		return fmt.Errorf("%s: %d dimensions, want 1 to 8", what, len(shape))
	}
	if len(chunks) != len(shape) {
		return fmt.Errorf("%s: chunk shape %v has %d dimensions, the array %d", what, chunks, len(chunks), len(shape))
	}
	n := size
	for i := range shape {
		if shape[i] < 0 || shape[i] > math.MaxInt32 {
			return fmt.Errorf("%s: shape %v: axis %d is %d", what, shape, i, shape[i])
		}
		if chunks[i] <= 0 {
			return fmt.Errorf("%s: chunk shape %v: axis %d is %d, want > 0", what, chunks, i, chunks[i])
		}
		if chunks[i] > maxChunkBytes || n*chunks[i] > maxChunkBytes {
			return fmt.Errorf("%s: chunk shape %v of %d-byte elements is over %d bytes", what, chunks, size, maxChunkBytes)
		}
		n *= chunks[i]
	}
	return nil
}

func identity(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	return p
}

func reversed(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = n - 1 - i
	}
	return p
}

func joinKey(idx []int, sep string) string {
	s := make([]string, len(idx))
	for i, v := range idx {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, sep)
}

// readJSON reads a metadata file into v, naming it in errors.
func (s *source) readJSON(path string, v any) error {
	b, err := s.getMeta(path)
	if err != nil {
		return err
	}
	if len(b) > 16<<20 {
		return fmt.Errorf("%s: %d bytes of metadata", path, len(b))
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// readV2 reads a Zarr v2 array (.zarray, and .zattrs when present).
func (s *source) readV2(dir string) (*arrayMeta, error) {
	file := joinLoc(dir, ".zarray")
	var z struct {
		ZarrFormat int               `json:"zarr_format"`
		Shape      []int             `json:"shape"`
		Chunks     []int             `json:"chunks"`
		Dtype      json.RawMessage   `json:"dtype"`
		Compressor json.RawMessage   `json:"compressor"`
		Fill       json.RawMessage   `json:"fill_value"`
		Order      string            `json:"order"`
		Filters    []json.RawMessage `json:"filters"`
		Sep        string            `json:"dimension_separator"`
	}
	if err := s.readJSON(file, &z); err != nil {
		return nil, err
	}
	bad := func(format string, a ...any) error { return fmt.Errorf("%s: %s", file, fmt.Sprintf(format, a...)) }
	if z.ZarrFormat != 2 {
		return nil, bad("zarr_format %d, want 2", z.ZarrFormat)
	}
	var ds string
	if err := json.Unmarshal(z.Dtype, &ds); err != nil {
		return nil, bad("dtype %s: structured types are not read", z.Dtype)
	}
	dt, err := parseV2Dtype(ds)
	if err != nil {
		return nil, bad("%v", err)
	}
	if err := checkGrid(z.Shape, z.Chunks, dt.size, "shape/chunks"); err != nil {
		return nil, bad("%v", err)
	}
	if len(z.Filters) > 0 {
		return nil, bad("filters %s are not read", z.Filters[0])
	}
	comp, err := v2Compressor(z.Compressor)
	if err != nil {
		return nil, bad("%v", err)
	}
	fill, err := fillValue(z.Fill, dt)
	if err != nil {
		return nil, bad("%v", err)
	}
	m := &arrayMeta{dir: dir, file: file, shape: z.Shape, chunks: z.Chunks, fill: fill}
	m.codec = chunkCodec{dt: dt, perm: identity(len(z.Shape))}
	switch z.Order {
	case "C", "":
	case "F":
		m.codec.perm = reversed(len(z.Shape))
	default:
		return nil, bad("order %q, want C or F", z.Order)
	}
	if comp != nil {
		m.codec.bytes = []bytesCodec{comp}
	}
	sep := "."
	switch z.Sep {
	case "", ".":
	case "/":
		sep = "/"
	default:
		return nil, bad("dimension_separator %q, want . or /", z.Sep)
	}
	m.key = func(idx []int) string { return joinKey(idx, sep) }
	if s.exists(joinLoc(dir, ".zattrs")) {
		if err := s.readJSON(joinLoc(dir, ".zattrs"), &m.attrs); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// v3Codec is one entry of a zarr.json codecs list.
type v3Codec struct {
	Name   string          `json:"name"`
	Config json.RawMessage `json:"configuration"`
}

// v3Node is a zarr.json: a group or an array.
type v3Node struct {
	ZarrFormat int                        `json:"zarr_format"`
	NodeType   string                     `json:"node_type"`
	Shape      []int                      `json:"shape"`
	DataType   json.RawMessage            `json:"data_type"`
	ChunkGrid  v3Codec                    `json:"chunk_grid"`
	KeyEnc     v3Codec                    `json:"chunk_key_encoding"`
	Fill       json.RawMessage            `json:"fill_value"`
	Codecs     []v3Codec                  `json:"codecs"`
	DimNames   []*string                  `json:"dimension_names"`
	Attrs      map[string]json.RawMessage `json:"attributes"`
	Storage    []json.RawMessage          `json:"storage_transformers"`
}

// readV3 reads a Zarr v3 array's zarr.json.
func readV3(dir string, n *v3Node) (*arrayMeta, error) {
	file := joinLoc(dir, "zarr.json")
	bad := func(format string, a ...any) error { return fmt.Errorf("%s: %s", file, fmt.Sprintf(format, a...)) }
	var dts string
	if err := json.Unmarshal(n.DataType, &dts); err != nil {
		return nil, bad("data_type %s is not read", n.DataType)
	}
	dt, err := parseNamedDtype(dts, false)
	if err != nil {
		return nil, bad("%v", err)
	}
	if n.ChunkGrid.Name != "regular" {
		return nil, bad("chunk_grid %q, want regular", n.ChunkGrid.Name)
	}
	var grid struct {
		ChunkShape []int `json:"chunk_shape"`
	}
	if err := json.Unmarshal(n.ChunkGrid.Config, &grid); err != nil {
		return nil, bad("chunk_grid configuration: %v", err)
	}
	if err := checkGrid(n.Shape, grid.ChunkShape, dt.size, "shape/chunk_shape"); err != nil {
		return nil, bad("%v", err)
	}
	if len(n.Storage) > 0 {
		return nil, bad("storage_transformers are not read")
	}
	m := &arrayMeta{dir: dir, file: file, shape: n.Shape, chunks: grid.ChunkShape, attrs: n.Attrs}
	if m.fill, err = fillValue(n.Fill, dt); err != nil {
		return nil, bad("%v", err)
	}
	var kc struct {
		Sep string `json:"separator"`
	}
	if len(n.KeyEnc.Config) > 0 {
		if err := json.Unmarshal(n.KeyEnc.Config, &kc); err != nil {
			return nil, bad("chunk_key_encoding: %v", err)
		}
	}
	switch n.KeyEnc.Name {
	case "default", "":
		sep := "/"
		if kc.Sep == "." {
			sep = "."
		} else if kc.Sep != "" && kc.Sep != "/" {
			return nil, bad("chunk_key_encoding separator %q", kc.Sep)
		}
		m.key = func(idx []int) string {
			if len(idx) == 0 {
				return "c"
			}
			return "c" + sep + joinKey(idx, sep)
		}
	case "v2":
		sep := "."
		if kc.Sep == "/" {
			sep = "/"
		} else if kc.Sep != "" && kc.Sep != "." {
			return nil, bad("chunk_key_encoding separator %q", kc.Sep)
		}
		m.key = func(idx []int) string {
			if len(idx) == 0 {
				return "0"
			}
			return joinKey(idx, sep)
		}
	default:
		return nil, bad("chunk_key_encoding %q, want default or v2", n.KeyEnc.Name)
	}
	for _, d := range n.DimNames {
		if d == nil {
			m.dimNames = append(m.dimNames, "")
		} else {
			m.dimNames = append(m.dimNames, *d)
		}
	}
	c, sh, err := v3Codecs(n.Codecs, dt, len(n.Shape), true)
	if err != nil {
		return nil, bad("%v", err)
	}
	m.codec = c
	if sh != nil {
		// Read by the inner chunks: each lies in one shard.
		for i := range m.chunks {
			if sh.inner[i] <= 0 || m.chunks[i]%sh.inner[i] != 0 {
				return nil, bad("sharding_indexed chunk_shape %v does not divide the shard shape %v", sh.inner, m.chunks)
			}
		}
		sh.perShard = make([]int, len(m.chunks))
		total := 1
		for i := range m.chunks {
			sh.perShard[i] = m.chunks[i] / sh.inner[i]
			total *= sh.perShard[i]
		}
		if total > maxChunkBytes/16 {
			return nil, bad("a shard of %d inner chunks", total)
		}
		sh.n = total
		sh.shardKey = m.key
		m.shard = sh
		m.chunks = sh.inner
		m.codec = sh.codec
	}
	return m, nil
}

// v3Codecs reads a codecs list: array-to-array (transpose), one
// array-to-bytes (bytes, or sharding_indexed when outer), bytes-to-bytes.
func v3Codecs(list []v3Codec, dt dtype, ndim int, outer bool) (chunkCodec, *shardSpec, error) {
	c := chunkCodec{dt: dt, perm: identity(ndim)}
	var sh *shardSpec
	seenBytes := false
	for i, k := range list {
		switch k.Name {
		case "transpose":
			if seenBytes {
				return c, nil, fmt.Errorf("codecs[%d]: transpose after the array-to-bytes codec", i)
			}
			var t struct {
				Order []int `json:"order"`
			}
			if err := json.Unmarshal(k.Config, &t); err != nil {
				return c, nil, fmt.Errorf("codecs[%d] transpose: %w", i, err)
			}
			if !isPerm(t.Order, ndim) {
				return c, nil, fmt.Errorf("codecs[%d] transpose: order %v is not a permutation of %d axes", i, t.Order, ndim)
			}
			p := make([]int, ndim)
			for j := range p {
				p[j] = c.perm[t.Order[j]]
			}
			c.perm = p
		case "bytes", "endian":
			if seenBytes {
				return c, nil, fmt.Errorf("codecs[%d]: a second array-to-bytes codec", i)
			}
			seenBytes = true
			var b struct {
				Endian string `json:"endian"`
			}
			if len(k.Config) > 0 {
				if err := json.Unmarshal(k.Config, &b); err != nil {
					return c, nil, fmt.Errorf("codecs[%d] bytes: %w", i, err)
				}
			}
			switch b.Endian {
			case "little", "":
			case "big":
				c.dt.big = dt.size > 1
			default:
				return c, nil, fmt.Errorf("codecs[%d] bytes: endian %q", i, b.Endian)
			}
		case "sharding_indexed":
			if !outer || seenBytes {
				return c, nil, fmt.Errorf("codecs[%d]: sharding_indexed is read only as the array's one array-to-bytes codec (not nested)", i)
			}
			if !isIdentity(c.perm) {
				return c, nil, fmt.Errorf("codecs[%d]: a transpose before sharding_indexed is not read", i)
			}
			if i != len(list)-1 {
				return c, nil, fmt.Errorf("codecs[%d]: bytes-to-bytes codecs after sharding_indexed are not read", i)
			}
			seenBytes = true
			var err error
			if sh, err = readSharding(k.Config, dt, ndim); err != nil {
				return c, nil, fmt.Errorf("codecs[%d] sharding_indexed: %w", i, err)
			}
		default:
			if !seenBytes {
				return c, nil, fmt.Errorf("codecs[%d]: %q before the array-to-bytes codec", i, k.Name)
			}
			id := strings.TrimPrefix(k.Name, "numcodecs.")
			bc, err := codecByID(id, nil)
			if err != nil {
				return c, nil, fmt.Errorf("codecs[%d]: %w", i, err)
			}
			// Decoding runs the list backwards.
			c.bytes = append([]bytesCodec{bc}, c.bytes...)
		}
	}
	if !seenBytes {
		return c, nil, fmt.Errorf("codecs: no array-to-bytes codec (bytes or sharding_indexed)")
	}
	return c, sh, nil
}

func isPerm(p []int, n int) bool {
	if len(p) != n {
		return false
	}
	seen := make([]bool, n)
	for _, v := range p {
		if v < 0 || v >= n || seen[v] {
			return false
		}
		seen[v] = true
	}
	return true
}

func isIdentity(p []int) bool {
	for i, v := range p {
		if i != v {
			return false
		}
	}
	return true
}

// readN5 reads an N5 dataset's attributes.json. N5 lists dimensions
// fastest first (F order); they are reversed here so that the array is
// C order like Zarr's, and so is a block's data.
func readN5(dir string, attrs map[string]json.RawMessage) (*arrayMeta, error) {
	file := joinLoc(dir, "attributes.json")
	bad := func(format string, a ...any) error { return fmt.Errorf("%s: %s", file, fmt.Sprintf(format, a...)) }
	var dims, block []int
	var dts string
	if err := json.Unmarshal(attrs["dimensions"], &dims); err != nil {
		return nil, bad("dimensions: %v", err)
	}
	if err := json.Unmarshal(attrs["blockSize"], &block); err != nil {
		return nil, bad("blockSize: %v", err)
	}
	if err := json.Unmarshal(attrs["dataType"], &dts); err != nil {
		return nil, bad("dataType: %v", err)
	}
	dt, err := parseNamedDtype(dts, true)
	if err != nil {
		return nil, bad("%v", err)
	}
	if err := checkGrid(dims, block, dt.size, "dimensions/blockSize"); err != nil {
		return nil, bad("%v", err)
	}
	n := len(dims)
	m := &arrayMeta{dir: dir, file: file, shape: make([]int, n), chunks: make([]int, n), n5: true, attrs: attrs}
	for i := range dims {
		m.shape[i], m.chunks[i] = dims[n-1-i], block[n-1-i]
	}
	m.codec = chunkCodec{dt: dt, perm: identity(n)}
	comp := attrs["compression"]
	var c struct {
		Type    string `json:"type"`
		UseZlib bool   `json:"useZlib"`
	}
	if len(comp) > 0 {
		if err := json.Unmarshal(comp, &c); err != nil {
			return nil, bad("compression: %v", err)
		}
	} else if len(attrs["compressionType"]) > 0 { // N5 before 1.0
		_ = json.Unmarshal(attrs["compressionType"], &c.Type)
	}
	var bc bytesCodec
	switch c.Type {
	case "raw", "":
	case "gzip":
		bc = gzipCodec
		if c.UseZlib {
			bc = zlibCodec
		}
	case "bzip2":
		bc = bz2Codec
	case "xz":
		bc = xzCodec
	case "blosc":
		bc = bloscCodecT{}
	case "zstd":
		bc = zstdCodec{}
	case "lz4":
		// lz4-java's LZ4Block stream (n5lz4.go); its "blockSize" only
		// sizes the writer's frames, which the frames' tokens carry.
		bc = n5LZ4Codec{}
	default:
		return nil, bad("compression type %q is not read (raw, gzip, bzip2, xz, lz4, blosc, zstd are)", c.Type)
	}
	if bc != nil {
		m.codec.bytes = []bytesCodec{bc}
	}
	m.key = func(idx []int) string {
		r := make([]int, len(idx))
		for i := range idx {
			r[i] = idx[len(idx)-1-i]
		}
		return joinKey(r, "/")
	}
	return m, nil
}
