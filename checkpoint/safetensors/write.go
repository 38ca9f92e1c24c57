package safetensors

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/voxtrain/voxtrain/internal/floatbytes"
)

// Float32 returns an F32 tensor holding v. On little-endian hosts (amd64,
// arm64, ...) Data aliases v's memory, so writing a model does not copy it;
// v must not change until the tensor has been written. On big-endian hosts
// Data is a converted copy.
func Float32(name string, shape []int, v []float32) Tensor {
	var data []byte
	if floatbytes.LittleEndian {
		data = floatbytes.Bytes(v)
	} else {
		data = make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(x))
		}
	}
	return Tensor{Name: name, DType: F32, Shape: shape, Data: data}
}

// Write writes tensors and metadata (may be nil) as a safetensors file to w
// and returns the number of bytes written. Every tensor is checked before
// the first byte is written: a non-empty, valid UTF-8, unique name other than
// "__metadata__", a known dtype, and len(Data) matching dtype × shape.
// Layout and header bytes follow the reference implementation (see the
// package doc). The tensors slice is not modified.
func Write(w io.Writer, tensors []Tensor, metadata map[string]string) (int64, error) {
	header, order, err := encodeHeader(tensors, metadata)
	if err != nil {
		return 0, err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	var n int64
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(header)))
	k, err := bw.Write(lenBuf[:])
	n += int64(k)
	if err == nil {
		k, err = bw.Write(header)
		n += int64(k)
	}
	for _, i := range order {
		if err != nil {
			break
		}
		k, err = bw.Write(tensors[i].Data)
		n += int64(k)
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return n, fmt.Errorf("write safetensors: %w", err)
	}
	// bufio counts what it accepted; after a successful Flush that is what w got.
	return n, nil
}

// Size returns the size of the file Write would produce, or the error it
// would return for invalid tensors.
func Size(tensors []Tensor, metadata map[string]string) (int64, error) {
	header, _, err := encodeHeader(tensors, metadata)
	if err != nil {
		return 0, err
	}
	n := int64(8 + len(header))
	for _, t := range tensors {
		n += int64(len(t.Data))
	}
	return n, nil
}

// encodeHeader validates tensors and returns the padded header bytes and the
// order in which the tensors' data follow it.
func encodeHeader(tensors []Tensor, metadata map[string]string) ([]byte, []int, error) {
	seen := make(map[string]bool, len(tensors))
	for _, t := range tensors {
		if err := checkTensor(t); err != nil {
			return nil, nil, err
		}
		if seen[t.Name] {
			return nil, nil, &FormatError{Tensor: t.Name, Msg: "duplicate name"}
		}
		seen[t.Name] = true
	}
	for k, v := range metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return nil, nil, &FormatError{Msg: fmt.Sprintf("metadata %q: not valid UTF-8", k)}
		}
	}

	// Descending dtype rank (alignment), then name: the reference order,
	// which keeps every tensor aligned to its element size.
	order := make([]int, len(tensors))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		ra, rb := dtypeInfo[tensors[a].DType].rank, dtypeInfo[tensors[b].DType].rank
		if ra != rb {
			return rb - ra
		}
		return strings.Compare(tensors[a].Name, tensors[b].Name)
	})

	var sb strings.Builder
	sb.WriteByte('{')
	first := true
	if len(metadata) > 0 {
		sb.WriteString(`"__metadata__":{`)
		keys := make([]string, 0, len(metadata))
		for k := range metadata {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				sb.WriteByte(',')
			}
			writeJSONString(&sb, k)
			sb.WriteByte(':')
			writeJSONString(&sb, metadata[k])
		}
		sb.WriteByte('}')
		first = false
	}
	var offset int64
	for _, i := range order {
		t := tensors[i]
		if !first {
			sb.WriteByte(',')
		}
		first = false
		writeJSONString(&sb, t.Name)
		sb.WriteString(`:{"dtype":"`)
		sb.WriteString(string(t.DType))
		sb.WriteString(`","shape":[`)
		for j, s := range t.Shape {
			if j > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(strconv.Itoa(s))
		}
		sb.WriteString(`],"data_offsets":[`)
		sb.WriteString(strconv.FormatInt(offset, 10))
		sb.WriteByte(',')
		offset += int64(len(t.Data))
		sb.WriteString(strconv.FormatInt(offset, 10))
		sb.WriteString("]}")
	}
	sb.WriteByte('}')
	for sb.Len()%8 != 0 {
		sb.WriteByte(' ')
	}
	if sb.Len() > MaxHeaderSize {
		return nil, nil, &FormatError{Msg: fmt.Sprintf("header of %d bytes exceeds the format's limit of %d", sb.Len(), MaxHeaderSize)}
	}
	return []byte(sb.String()), order, nil
}

func checkTensor(t Tensor) error {
	switch {
	case t.Name == "":
		return &FormatError{Msg: "tensor with an empty name"}
	case !utf8.ValidString(t.Name):
		return &FormatError{Tensor: t.Name, Msg: "name is not valid UTF-8"}
	case t.Name == metaKey:
		return &FormatError{Tensor: t.Name, Msg: "name is reserved for the file's metadata"}
	case !t.DType.Valid():
		return &FormatError{Tensor: t.Name, Msg: fmt.Sprintf("unknown dtype %q", t.DType)}
	}
	n, ok := byteLen(t.DType, t.Shape)
	if !ok {
		return &FormatError{Tensor: t.Name, Msg: fmt.Sprintf("invalid shape %v", t.Shape)}
	}
	if int64(len(t.Data)) != n {
		return &FormatError{Tensor: t.Name, Msg: fmt.Sprintf("shape %v of %s needs %d bytes, data has %d", t.Shape, t.DType, n, len(t.Data))}
	}
	return nil
}

// writeJSONString writes s as a JSON string the way serde_json does: only
// '"', '\\' and control characters are escaped, everything else (including
// non-ASCII, '<', '>', '&') is written as is. Go's encoding/json would
// escape more and so differ from the reference's bytes.
func writeJSONString(sb *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	sb.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			sb.WriteString(`\"`)
		case '\\':
			sb.WriteString(`\\`)
		case '\b':
			sb.WriteString(`\b`)
		case '\f':
			sb.WriteString(`\f`)
		case '\n':
			sb.WriteString(`\n`)
		case '\r':
			sb.WriteString(`\r`)
		case '\t':
			sb.WriteString(`\t`)
		default:
			if c < 0x20 {
				sb.WriteString(`\u00`)
				sb.WriteByte(hex[c>>4])
				sb.WriteByte(hex[c&15])
			} else {
				sb.WriteByte(c)
			}
		}
	}
	sb.WriteByte('"')
}
