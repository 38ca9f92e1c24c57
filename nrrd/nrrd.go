// Package nrrd reads NRRD volumes (.nrrd with the data attached, .nhdr
// with a detached data file) for the data pipeline, and writes label maps
// (WriteLabels): it registers a volume.Format, so volume.Open reads them
// and volume.WriteLabels writes them once the package is linked in.
//
// Supported: dimension 2, 3, or 4 with one channel axis (the first or the
// last, named by its kind or by a "none" space direction); types int8 to
// uint64, float and double; encodings raw, gzip, bzip2 and ascii; both
// endiannesses; line skip and byte skip; space directions and origin in
// any of the anatomical spaces, turned into the RAS+ affine package volume
// uses; the spatial unit from "space units" (or the spatial axes'
// "units"), which must agree across the spatial axes. Not supported: the
// "block" type, hex encoding, and data split over several files (a "data
// file" list or pattern).
package nrrd

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/voxtrain/voxtrain/internal/rawvol"
	"github.com/voxtrain/voxtrain/volume"
)

func init() {
	volume.Register(volume.Format{Name: "nrrd", Match: Match, Open: Open, WriteLabels: WriteLabels,
		Endings: []string{".nrrd", ".nhdr"}, Files: writtenFiles, Reads: dataFile})
}

// Match reports whether path names a NRRD file (.nrrd or .nhdr).
func Match(path string) bool {
	l := strings.ToLower(path)
	return strings.HasSuffix(l, ".nrrd") || strings.HasSuffix(l, ".nhdr")
}

// maxHeader bounds the header: a NRRD header is text of a few KB.
const maxHeader = 1 << 20

// Header is a parsed NRRD header: the fields as written (lower-case
// names) and the offset of the attached data.
type Header struct {
	// Fields maps each field name (lower case, spaces kept) to its value.
	Fields map[string]string
	// DataOffset is where the data starts in the header's own file.
	DataOffset int64
}

// ReadHeader reads the header of the NRRD file at path.
func ReadHeader(path string) (*Header, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseHeader(io.LimitReader(f, maxHeader+1), path)
}

// ParseHeader parses a NRRD header from r (name is used in errors).
func ParseHeader(r io.Reader, name string) (*Header, error) {
	br := bufio.NewReader(r)
	h := &Header{Fields: map[string]string{}}
	var off int64
	line := func() (string, bool, error) {
		s, err := br.ReadString('\n')
		off += int64(len(s))
		if off > maxHeader {
			return "", false, fmt.Errorf("nrrd: %s: header longer than %d bytes", name, maxHeader)
		}
		if err == io.EOF {
			return strings.TrimRight(s, "\r\n"), len(s) == 0, nil
		}
		if err != nil {
			return "", false, fmt.Errorf("nrrd: %s: %w", name, err)
		}
		return strings.TrimRight(s, "\r\n"), false, nil
	}
	magic, eof, err := line()
	if err != nil {
		return nil, err
	}
	if eof || !strings.HasPrefix(magic, "NRRD000") || len(magic) != 8 {
		return nil, fmt.Errorf("nrrd: %s: no NRRD magic (first line %.20q)", name, magic)
	}
	for {
		s, eof, err := line()
		if err != nil {
			return nil, err
		}
		if s == "" {
			// A blank line (or the end of a detached header) ends the header.
			break
		}
		if strings.HasPrefix(s, "#") {
			continue
		}
		if i := strings.Index(s, ":="); i >= 0 && !strings.Contains(s[:i], ": ") {
			continue // a key/value pair: not geometry
		}
		i := strings.Index(s, ": ")
		if i <= 0 {
			return nil, fmt.Errorf("nrrd: %s: header line %q is not \"field: value\"", name, s)
		}
		h.Fields[strings.ToLower(strings.TrimSpace(s[:i]))] = strings.TrimSpace(s[i+2:])
		if eof {
			break
		}
	}
	h.DataOffset = off
	return h, nil
}

// field returns a field's value, trying its alternative spellings.
func (h *Header) field(names ...string) (string, bool) {
	for _, n := range names {
		if v, ok := h.Fields[n]; ok {
			return v, true
		}
	}
	return "", false
}

var types = map[string]rawvol.Type{}

func init() {
	for t, names := range map[rawvol.Type][]string{
		rawvol.Int8:    {"signed char", "int8", "int8_t"},
		rawvol.Uint8:   {"uchar", "unsigned char", "uint8", "uint8_t"},
		rawvol.Int16:   {"short", "short int", "signed short", "signed short int", "int16", "int16_t"},
		rawvol.Uint16:  {"ushort", "unsigned short", "unsigned short int", "uint16", "uint16_t"},
		rawvol.Int32:   {"int", "signed int", "int32", "int32_t"},
		rawvol.Uint32:  {"uint", "unsigned int", "uint32", "uint32_t"},
		rawvol.Int64:   {"longlong", "long long", "long long int", "signed long long", "signed long long int", "int64", "int64_t"},
		rawvol.Uint64:  {"ulonglong", "unsigned long long", "unsigned long long int", "uint64", "uint64_t"},
		rawvol.Float32: {"float"},
		rawvol.Float64: {"double"},
	} {
		for _, n := range names {
			types[n] = t
		}
	}
}

// spaceSigns gives, per anatomical space, the signs that turn its first
// three world axes into RAS+: LPS's x grows to the left and y to the
// back, so both flip.
var spaceSigns = map[string][3]float64{
	"right-anterior-superior": {1, 1, 1}, "ras": {1, 1, 1},
	"left-anterior-superior": {-1, 1, 1}, "las": {-1, 1, 1},
	"left-posterior-superior": {-1, -1, 1}, "lps": {-1, -1, 1},
	// Not anatomical: kept as they are.
	"scanner-xyz": {1, 1, 1}, "3d-right-handed": {1, 1, 1}, "3d-left-handed": {1, 1, 1},
}

// Open opens a NRRD file as a volume.File, reading only its header.
func Open(path string) (volume.File, error) {
	h, err := ReadHeader(path)
	if err != nil {
		return nil, err
	}
	s, err := h.Spec(path)
	if err != nil {
		return nil, err
	}
	return rawvol.Open(*s)
}

// Spec interprets the header of the file at path.
func (h *Header) Spec(path string) (*rawvol.Spec, error) {
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("nrrd: %s: field %q: %s", path, field, fmt.Sprintf(format, a...))
	}
	s := &rawvol.Spec{Format: "nrrd", Header: path, Data: path, Offset: h.DataOffset}

	tname, ok := h.field("type")
	if !ok {
		return nil, bad("type", "missing")
	}
	if s.Type, ok = types[strings.ToLower(tname)]; !ok {
		return nil, bad("type", "unknown type %q", tname)
	}
	dimS, ok := h.field("dimension")
	if !ok {
		return nil, bad("dimension", "missing")
	}
	dim, err := strconv.Atoi(dimS)
	if err != nil || dim < 2 || dim > 4 {
		return nil, bad("dimension", "%q: want 2, 3 or 4", dimS)
	}
	sizes, err := ints(h.Fields["sizes"], dim)
	if err != nil {
		return nil, bad("sizes", "%v", err)
	}
	for _, n := range sizes {
		if n < 1 {
			return nil, bad("sizes", "%v: an axis < 1", sizes)
		}
	}

	enc, _ := h.field("encoding")
	switch strings.ToLower(enc) {
	case "raw":
		s.Encoding = rawvol.Raw
	case "gzip", "gz":
		s.Encoding = rawvol.Gzip
	case "bzip2", "bz2":
		s.Encoding = rawvol.Bzip2
	case "ascii", "text", "txt":
		s.Encoding = rawvol.ASCII
	case "":
		return nil, bad("encoding", "missing")
	default:
		return nil, bad("encoding", "%q: %v", enc, rawvol.ErrUnsupported)
	}
	if e, ok := h.field("endian"); ok {
		switch strings.ToLower(e) {
		case "big":
			s.BigEndian = true
		case "little":
		default:
			return nil, bad("endian", "%q: want little or big", e)
		}
	} else if s.Type.Size() > 1 && s.Encoding != rawvol.ASCII {
		return nil, bad("endian", "missing for %v samples", s.Type)
	}

	// The data: attached after the blank line, or in another file.
	if df, ok := h.field("data file", "datafile"); ok {
		if strings.HasPrefix(df, "LIST") || strings.ContainsAny(df, " %") {
			return nil, bad("data file", "%q: data in several files is %v", df, rawvol.ErrUnsupported)
		}
		if !filepath.IsAbs(df) {
			df = filepath.Join(filepath.Dir(path), df)
		}
		s.Data, s.Offset = df, 0
	}
	if ls, ok := h.field("line skip", "lineskip"); ok {
		n, err := strconv.Atoi(ls)
		if err != nil || n < 0 {
			return nil, bad("line skip", "%q", ls)
		}
		if s.Offset, err = skipLines(s.Data, s.Offset, n); err != nil {
			return nil, bad("line skip", "%v", err)
		}
	}
	if bs, ok := h.field("byte skip", "byteskip"); ok {
		n, err := strconv.ParseInt(bs, 10, 64)
		switch {
		case err != nil || n < -1:
			return nil, bad("byte skip", "%q", bs)
		case n == -1 && s.Encoding != rawvol.Raw:
			return nil, bad("byte skip", "-1 with %v encoding", s.Encoding)
		case n == -1:
			s.Offset = -1
		case s.Encoding == rawvol.Raw:
			s.Offset += n
		default:
			s.Skip = n
		}
	}

	// Which axis holds channels (4D), and which are spatial.
	chAxis, err := h.channelAxis(dim, bad)
	if err != nil {
		return nil, err
	}
	var spatial []int // axes, fastest first
	for i := range dim {
		if i != chAxis {
			spatial = append(spatial, i)
		}
	}
	g := &s.Geometry
	g.Channels = 1
	if chAxis >= 0 {
		g.Channels = sizes[chAxis]
		s.Interleaved = chAxis == 0
	}
	if len(spatial) == 2 {
		g.Shape = [3]int{1, sizes[spatial[1]], sizes[spatial[0]]}
	} else {
		g.Shape = [3]int{sizes[spatial[2]], sizes[spatial[1]], sizes[spatial[0]]}
	}
	if err := h.geometry(s, dim, spatial, bad); err != nil {
		return nil, err
	}
	if g.Unit, err = h.unit(spatial, bad); err != nil {
		return nil, err
	}
	return s, nil
}

// unit reads the spatial unit (volume.Header.Unit's spelling): "space
// units" ("mm" "mm" "mm", one per world axis, as Slicer and ITK write
// it), else the spatial axes' entries of the per-axis "units". They must
// agree as volume.AxesUnit says; "???" and "" are no unit, as the NRRD
// format writes an unknown one.
func (h *Header) unit(spatial []int, bad func(string, string, ...any) error) (string, error) {
	field := "space units"
	v, ok := h.field(field)
	var us, names []string
	if ok {
		us = quoted(v)
		for i := range us {
			names = append(names, fmt.Sprintf("world axis %d", i))
		}
	} else if v, ok = h.field("units"); ok {
		field = "units"
		all := quoted(v)
		for _, ax := range spatial {
			if ax < len(all) {
				us, names = append(us, all[ax]), append(names, fmt.Sprintf("axis %d", ax))
			}
		}
	}
	for i, u := range us {
		if u == "???" {
			us[i] = ""
		}
	}
	unit, err := volume.AxesUnit(us, names)
	if err != nil {
		return "", bad(field, "%q: %v", v, err)
	}
	return unit, nil
}

// quoted returns the double-quoted strings of a NRRD field ("mm" "mm").
func quoted(s string) []string {
	var out []string
	for {
		i := strings.IndexByte(s, '"')
		if i < 0 {
			return out
		}
		j := strings.IndexByte(s[i+1:], '"')
		if j < 0 {
			return out
		}
		out = append(out, s[i+1:i+1+j])
		s = s[i+j+2:]
	}
}

// channelAxis finds the 4D file's channel axis (−1 for a 2D or 3D file):
// the axis whose space direction is "none", else the one whose kind is not
// spatial, else the last. It must be the first or the last axis.
func (h *Header) channelAxis(dim int, bad func(string, string, ...any) error) (int, error) {
	if dim < 4 {
		return -1, nil
	}
	ch := -1
	if sd, ok := h.field("space directions"); ok {
		for i, d := range splitVectors(sd) {
			if d == "none" {
				if ch >= 0 {
					return 0, bad("space directions", "%q: more than one non-spatial axis", sd)
				}
				ch = i
			}
		}
	}
	if k, ok := h.field("kinds"); ch < 0 && ok {
		for i, kind := range strings.Fields(k) {
			switch strings.ToLower(kind) {
			case "domain", "space", "time", "???", "none":
			default:
				if ch >= 0 {
					return 0, bad("kinds", "%q: more than one non-spatial axis", k)
				}
				ch = i
			}
		}
	}
	if ch < 0 {
		ch = dim - 1
	}
	if ch != 0 && ch != dim-1 {
		return 0, bad("kinds", "channel axis %d: only the first or the last axis is %v", ch, rawvol.ErrUnsupported)
	}
	return ch, nil
}

// geometry sets the spacing and the RAS+ affine from space directions and
// space origin, or from spacings (then the affine is the diagonal of the
// spacings, origin 0).
func (h *Header) geometry(s *rawvol.Spec, dim int, spatial []int, bad func(string, string, ...any) error) error {
	g := &s.Geometry
	var dirs [3][3]float64 // dirs[k] is the world vector of spatial axis k (x, y, z = W, H, D)
	var origin [3]float64
	signs := [3]float64{1, 1, 1}
	if sp, ok := h.field("space"); ok {
		if signs, ok = spaceSigns[strings.ToLower(sp)]; !ok {
			return bad("space", "%q: %v", sp, rawvol.ErrUnsupported)
		}
	}
	sd, haveDirs := h.field("space directions")
	if haveDirs {
		vs := splitVectors(sd)
		if len(vs) != dim {
			return bad("space directions", "%q: %d entries for dimension %d", sd, len(vs), dim)
		}
		for k, ax := range spatial {
			v, err := vector(vs[ax])
			if err != nil {
				return bad("space directions", "%v", err)
			}
			if len(v) != 3 && !(len(v) == 2 && len(spatial) == 2) {
				return bad("space directions", "%q: want 3-vectors", sd)
			}
			copy(dirs[k][:], v)
		}
		if len(spatial) == 2 {
			dirs[2] = [3]float64{0, 0, 1}
		}
		if o, ok := h.field("space origin"); ok {
			v, err := vector(o)
			if err != nil || len(v) < 2 || len(v) > 3 {
				return bad("space origin", "%q", o)
			}
			copy(origin[:], v)
		}
	} else {
		sp := [3]float64{1, 1, 1}
		if ss, ok := h.field("spacings"); ok {
			f := strings.Fields(ss)
			if len(f) != dim {
				return bad("spacings", "%q: %d entries for dimension %d", ss, len(f), dim)
			}
			for k, ax := range spatial {
				x, err := strconv.ParseFloat(f[ax], 64)
				if err == nil && !math.IsNaN(x) && x != 0 && !math.IsInf(x, 0) {
					sp[k] = x
				}
			}
		}
		for k := range 3 {
			dirs[k][k] = sp[k]
		}
	}
	for k := range 3 {
		n := math.Sqrt(dirs[k][0]*dirs[k][0] + dirs[k][1]*dirs[k][1] + dirs[k][2]*dirs[k][2])
		if n == 0 || math.IsNaN(n) || math.IsInf(n, 0) {
			return bad("space directions", "spatial axis %d has direction %v", k, dirs[k])
		}
		g.Spacing[2-k] = n
	}
	for r := range 3 {
		for k := range 3 {
			g.Affine[r][k] = signs[r] * dirs[k][r]
		}
		g.Affine[r][3] = signs[r] * origin[r]
	}
	g.Affine[3][3] = 1
	return nil
}

// skipLines returns the offset after n more lines from off in file path.
func skipLines(path string, off int64, n int) (int64, error) {
	if n == 0 {
		return off, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return 0, err
	}
	br := bufio.NewReader(f)
	for i := range n {
		s, err := br.ReadSlice('\n')
		for errors.Is(err, bufio.ErrBufferFull) {
			off += int64(len(s))
			s, err = br.ReadSlice('\n')
		}
		if err != nil {
			return 0, fmt.Errorf("%s ends at line %d of %d", path, i, n)
		}
		off += int64(len(s))
	}
	return off, nil
}

// ints parses n integers separated by spaces.
func ints(s string, n int) ([]int, error) {
	f := strings.Fields(s)
	if len(f) != n {
		return nil, fmt.Errorf("%q: %d values, want %d", s, len(f), n)
	}
	out := make([]int, n)
	for i, w := range f {
		x, err := strconv.Atoi(w)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", s, err)
		}
		out[i] = x
	}
	return out, nil
}

// splitVectors splits "(1,0,0) (0,1,0) none" into its entries.
func splitVectors(s string) []string {
	var out []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		if s[0] == '(' {
			i := strings.IndexByte(s, ')')
			if i < 0 {
				return append(out, s)
			}
			out = append(out, s[:i+1])
			s = s[i+1:]
			continue
		}
		i := strings.IndexAny(s, " \t")
		if i < 0 {
			return append(out, s)
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

// vector parses "(1.5,0,-2)".
func vector(s string) ([]float64, error) {
	t := strings.TrimSpace(s)
	if len(t) < 2 || t[0] != '(' || t[len(t)-1] != ')' {
		return nil, fmt.Errorf("%q is not a vector", s)
	}
	var out []float64
	for _, w := range bytes.Split([]byte(t[1:len(t)-1]), []byte(",")) {
		x, err := strconv.ParseFloat(strings.TrimSpace(string(w)), 64)
		if err != nil || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%q is not a vector of numbers", s)
		}
		out = append(out, x)
	}
	return out, nil
}

// dataFile returns the data file a detached header at path names (none
// for attached data, data in several files, or a header that cannot be
// read: opening it says why).
func dataFile(path string) []string {
	h, err := ReadHeader(path)
	if err != nil {
		return nil
	}
	df, ok := h.field("data file", "datafile")
	if !ok || strings.HasPrefix(df, "LIST") || strings.ContainsAny(df, " %") {
		return nil
	}
	if !filepath.IsAbs(df) {
		df = filepath.Join(filepath.Dir(path), df)
	}
	return []string{df}
}
