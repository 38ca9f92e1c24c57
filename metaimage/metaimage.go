// Package metaimage reads MetaImage volumes (ITK's MetaIO: .mha with the
// data attached, .mhd with a .raw or .zraw data file) for the data
// pipeline, and writes label maps (WriteLabels): it registers a
// volume.Format, so volume.Open reads them and volume.WriteLabels writes
// them once the package is linked in.
//
// Supported: NDims 2 or 3 with ElementNumberOfChannels channels
// (interleaved, as MetaIO writes them), every MET_ scalar type, both byte
// orders, zlib-compressed data, HeaderSize (−1: the data is the end of the
// file), ElementSpacing, Offset and TransformMatrix. MetaIO, like ITK,
// works in LPS coordinates; the affine is turned into the RAS+ one package
// volume uses by negating its first two rows. MetaIO has no unit field
// (ITK takes millimetres by convention, other writers their own), so the
// header's Unit is "": a dataset manifest takes the file to be in the
// unit of the volume it is compared with. Not supported: data split over
// several files (ElementDataFile LIST or a pattern).
package metaimage

import (
	"bufio"
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
	volume.Register(volume.Format{Name: "metaimage", Match: Match, Open: Open, WriteLabels: WriteLabels,
		Endings: []string{".mha", ".mhd"}, Files: writtenFiles, Reads: dataFile})
}

// Match reports whether path names a MetaImage file (.mha or .mhd).
func Match(path string) bool {
	l := strings.ToLower(path)
	return strings.HasSuffix(l, ".mha") || strings.HasSuffix(l, ".mhd")
}

// maxHeader bounds the header, a few hundred bytes of text.
const maxHeader = 1 << 20

// Header is a parsed MetaImage header.
type Header struct {
	// Fields maps each key, as written, to its value.
	Fields map[string]string
	// DataOffset is where the data starts in the header's own file (after
	// the ElementDataFile line).
	DataOffset int64
}

// ReadHeader reads the header of the MetaImage file at path.
func ReadHeader(path string) (*Header, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseHeader(io.LimitReader(f, maxHeader+1), path)
}

// ParseHeader parses a MetaImage header from r: "Key = Value" lines up to
// and including ElementDataFile, which is always the last.
func ParseHeader(r io.Reader, name string) (*Header, error) {
	br := bufio.NewReader(r)
	h := &Header{Fields: map[string]string{}}
	for {
		s, err := br.ReadString('\n')
		h.DataOffset += int64(len(s))
		if h.DataOffset > maxHeader {
			return nil, fmt.Errorf("metaimage: %s: header longer than %d bytes", name, maxHeader)
		}
		t := strings.TrimSpace(s)
		if t != "" {
			i := strings.IndexByte(t, '=')
			if i <= 0 {
				return nil, fmt.Errorf("metaimage: %s: header line %.40q is not \"Key = Value\"", name, t)
			}
			k := strings.TrimSpace(t[:i])
			h.Fields[k] = strings.TrimSpace(t[i+1:])
			if k == "ElementDataFile" {
				return h, nil
			}
		}
		if err == io.EOF {
			return nil, fmt.Errorf("metaimage: %s: no ElementDataFile line", name)
		}
		if err != nil {
			return nil, fmt.Errorf("metaimage: %s: %w", name, err)
		}
	}
}

// field returns a key's value, trying its synonyms.
func (h *Header) field(names ...string) (string, string, bool) {
	for _, n := range names {
		if v, ok := h.Fields[n]; ok {
			return n, v, true
		}
	}
	return names[0], "", false
}

// types maps MetaIO's element types to sample types (MET_LONG is 4 bytes
// in MetaIO, whatever the platform's long).
var types = map[string]rawvol.Type{
	"MET_CHAR": rawvol.Int8, "MET_UCHAR": rawvol.Uint8,
	"MET_SHORT": rawvol.Int16, "MET_USHORT": rawvol.Uint16,
	"MET_INT": rawvol.Int32, "MET_UINT": rawvol.Uint32,
	"MET_LONG": rawvol.Int32, "MET_ULONG": rawvol.Uint32,
	"MET_LONG_LONG": rawvol.Int64, "MET_ULONG_LONG": rawvol.Uint64,
	"MET_FLOAT": rawvol.Float32, "MET_DOUBLE": rawvol.Float64,
}

// Open opens a MetaImage file as a volume.File, reading only its header.
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
		return fmt.Errorf("metaimage: %s: %s: %s", path, field, fmt.Sprintf(format, a...))
	}
	s := &rawvol.Spec{Format: "metaimage", Header: path, Data: path, Offset: h.DataOffset}
	_, nd, _ := h.field("NDims")
	n, err := strconv.Atoi(nd)
	if err != nil || n < 2 || n > 3 {
		return nil, bad("NDims", "%q: want 2 or 3", nd)
	}
	_, ds, _ := h.field("DimSize")
	dims, err := numbers(ds, n)
	if err != nil {
		return nil, bad("DimSize", "%v", err)
	}
	var size [3]int
	for i := range n {
		d := dims[i]
		if d != math.Trunc(d) || d < 1 || d > math.MaxInt32 {
			return nil, bad("DimSize", "%q: an axis that is not a positive integer", ds)
		}
		size[i] = int(d)
	}
	if n == 2 {
		size[2] = 1
	}
	g := &s.Geometry
	g.Shape = [3]int{size[2], size[1], size[0]}
	g.Channels = 1
	if k, c, ok := h.field("ElementNumberOfChannels"); ok {
		if g.Channels, err = strconv.Atoi(c); err != nil || g.Channels < 1 {
			return nil, bad(k, "%q", c)
		}
	}
	s.Interleaved = true
	_, et, _ := h.field("ElementType")
	var ok bool
	if s.Type, ok = types[et]; !ok {
		return nil, bad("ElementType", "unknown type %q", et)
	}
	if k, v, ok := h.field("BinaryDataByteOrderMSB", "ElementByteOrderMSB"); ok {
		if s.BigEndian, err = boolean(v); err != nil {
			return nil, bad(k, "%v", err)
		}
	}
	if k, v, ok := h.field("BinaryData"); ok {
		if b, err := boolean(v); err != nil || !b {
			return nil, bad(k, "%q: only binary data is %v", v, rawvol.ErrUnsupported)
		}
	}
	if k, v, ok := h.field("CompressedData"); ok {
		c, err := boolean(v)
		if err != nil {
			return nil, bad(k, "%v", err)
		}
		if c {
			s.Encoding = rawvol.Zlib
		}
	}
	_, df, _ := h.field("ElementDataFile")
	switch {
	case df == "LOCAL" || df == "Local" || df == "local":
	case df == "" || strings.HasPrefix(df, "LIST") || strings.Contains(df, "%"):
		return nil, bad("ElementDataFile", "%q: data in several files is %v", df, rawvol.ErrUnsupported)
	default:
		if !filepath.IsAbs(df) {
			df = filepath.Join(filepath.Dir(path), df)
		}
		s.Data, s.Offset = df, 0
	}
	if k, v, ok := h.field("HeaderSize"); ok && s.Data != path {
		hs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || hs < -1 || (hs == -1 && s.Encoding != rawvol.Raw) {
			return nil, bad(k, "%q", v)
		}
		s.Offset = hs
	}

	// Geometry: LPS world = Offset + TransformMatrix · diag(spacing) · index.
	spacing := []float64{1, 1, 1}
	if k, v, ok := h.field("ElementSpacing", "ElementSize"); ok {
		sp, err := numbers(v, n)
		if err != nil {
			return nil, bad(k, "%v", err)
		}
		copy(spacing, sp)
	}
	origin := []float64{0, 0, 0}
	if k, v, ok := h.field("Offset", "Origin", "Position"); ok {
		o, err := numbers(v, n)
		if err != nil {
			return nil, bad(k, "%v", err)
		}
		copy(origin, o)
	}
	var dir [3][3]float64 // dir[k] is axis k's unit vector
	for k := range 3 {
		dir[k][k] = 1
	}
	if k, v, ok := h.field("TransformMatrix", "Rotation", "Orientation"); ok {
		m, err := numbers(v, n*n)
		if err != nil {
			return nil, bad(k, "%v", err)
		}
		// MetaIO writes axis after axis: the first n numbers are the first
		// axis's direction (ITK's direction matrix, column by column).
		for a := range n {
			for r := range n {
				dir[a][r] = m[a*n+r]
			}
		}
	}
	for a := range 3 {
		if spacing[a] == 0 || math.IsNaN(spacing[a]) || math.IsInf(spacing[a], 0) {
			return nil, bad("ElementSpacing", "axis %d spacing %v", a, spacing[a])
		}
		g.Spacing[2-a] = math.Abs(spacing[a])
	}
	lpsToRAS := [3]float64{-1, -1, 1}
	for r := range 3 {
		for a := range 3 {
			g.Affine[r][a] = lpsToRAS[r] * dir[a][r] * spacing[a]
		}
		g.Affine[r][3] = lpsToRAS[r] * origin[r]
	}
	g.Affine[3][3] = 1
	return s, nil
}

// numbers parses n space-separated numbers.
func numbers(s string, n int) ([]float64, error) {
	f := strings.Fields(s)
	if len(f) != n {
		return nil, fmt.Errorf("%.60q: %d values, want %d", s, len(f), n)
	}
	out := make([]float64, n)
	for i, w := range f {
		x, err := strconv.ParseFloat(w, 64)
		if err != nil {
			return nil, fmt.Errorf("%.60q: %w", s, err)
		}
		out[i] = x
	}
	return out, nil
}

// boolean parses MetaIO's True/False.
func boolean(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "true", "1", "yes":
		return true, nil
	case "false", "0", "no":
		return false, nil
	}
	return false, fmt.Errorf("%q is not True or False", s)
}

// dataFile returns the data file the header at path names
// (ElementDataFile; none for LOCAL data, data in several files, or a
// header that cannot be read: opening it says why).
func dataFile(path string) []string {
	h, err := ReadHeader(path)
	if err != nil {
		return nil
	}
	_, df, _ := h.field("ElementDataFile")
	if df == "" || strings.EqualFold(df, "LOCAL") || strings.HasPrefix(df, "LIST") || strings.Contains(df, "%") {
		return nil
	}
	if !filepath.IsAbs(df) {
		df = filepath.Join(filepath.Dir(path), df)
	}
	return []string{df}
}
