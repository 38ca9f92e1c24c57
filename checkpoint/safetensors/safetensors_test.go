package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/go_written.safetensors")

// value is the fixture formula shared with testdata/fixtures.py.
func value(i, k int) float64 { return float64(i%97)*0.25 - 12 + float64(k) }

func formula(n, k int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(value(i, k))
	}
	return v
}

func parseBytes(t *testing.T, b []byte) *Reader {
	t.Helper()
	r, err := Parse(bytes.NewReader(b), int64(len(b)), "test")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestPythonWrittenFixture reads a file written by Python's
// safetensors.torch.save_file (testdata/fixtures.py make) and checks every
// tensor against the formula, then checks that Write reproduces the file
// byte for byte from the parsed tensors.
func TestPythonWrittenFixture(t *testing.T) {
	path := filepath.Join("testdata", "python_written.safetensors")
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := f.Metadata(); !reflect.DeepEqual(got, map[string]string{"format": "pt"}) {
		t.Errorf("metadata = %v", got)
	}
	floats := []struct {
		name  string
		dtype DType
		shape []int
		k     int
	}{
		{"conv.weight", F32, []int{4, 2, 3, 3, 3}, 0},
		{"conv.bias", F32, []int{4}, 1},
		{"half", F16, []int{3, 5}, 2},
		{"bf", BF16, []int{2, 3}, 3},
		{"f64", F64, []int{5}, 4},
		{"empty", F32, []int{0, 3}, 0},
		{"ünï \"çødé\"\n", F32, []int{2}, 5},
		{"a<b>&c", F32, []int{1, 1}, 6},
	}
	for _, c := range floats {
		info, ok := f.Lookup(c.name)
		if !ok {
			t.Fatalf("%q missing", c.name)
		}
		if info.DType != c.dtype || !reflect.DeepEqual(info.Shape, c.shape) {
			t.Errorf("%q: %s %v, want %s %v", c.name, info.DType, info.Shape, c.dtype, c.shape)
		}
		got := make([]float32, info.NumElements())
		if err := f.ReadFloat32(c.name, got); err != nil {
			t.Fatal(err)
		}
		if want := formula(len(got), c.k); !reflect.DeepEqual(got, want) {
			t.Errorf("%q = %v, want %v", c.name, got, want)
		}
	}
	count := make([]int64, 1)
	if err := f.ReadInt64("count", count); err != nil || count[0] != 123456789012 {
		t.Errorf("count = %v, %v", count, err)
	}
	idx := make([]int64, 4)
	if err := f.ReadInt64("idx", idx); err != nil {
		t.Fatal(err)
	}
	for i, v := range idx {
		if v != int64(i)*1000003-5000000 {
			t.Errorf("idx[%d] = %d", i, v)
		}
	}
	if info, _ := f.Lookup("count"); len(info.Shape) != 0 || info.NumElements() != 1 {
		t.Errorf("scalar count: shape %v", info.Shape)
	}
	if n := len(f.Tensors()); n != 10 {
		t.Errorf("%d tensors, want 10", n)
	}

	// Re-encode: the reference writer's layout must come out byte-identical.
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ts []Tensor
	for _, info := range f.Tensors() {
		raw, err := f.ReadRaw(info.Name)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, Tensor{Name: info.Name, DType: info.DType, Shape: info.Shape, Data: raw})
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(ts), func(i, j int) { ts[i], ts[j] = ts[j], ts[i] })
	var buf bytes.Buffer
	if _, err := Write(&buf, ts, f.Metadata()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), orig) {
		t.Errorf("Write of the parsed fixture differs from Python's bytes:\n got %q\nwant %q", buf.Bytes()[:200], orig[:200])
	}
}

// goWrittenTensors is the state dict of Tiny in testdata/fixtures.py.
func goWrittenTensors() []Tensor {
	specs := []struct {
		name  string
		shape []int
	}{
		{"encoder.0.weight", []int{4, 1, 3, 3, 3}},
		{"encoder.0.bias", []int{4}},
		{"encoder.1.weight", []int{4}},
		{"encoder.1.bias", []int{4}},
		{"head.weight", []int{2, 4, 1, 1, 1}},
		{"head.bias", []int{2}},
	}
	var ts []Tensor
	for k, s := range specs {
		ts = append(ts, Float32(s.name, s.shape, formula(NumElements(s.shape), k)))
	}
	return ts
}

// TestGoWrittenFixture holds Write's output to the committed file that
// testdata/fixtures.py check loads with safetensors.torch and
// load_state_dict, and compares with the reference writer's bytes.
func TestGoWrittenFixture(t *testing.T) {
	var buf bytes.Buffer
	if _, err := Write(&buf, goWrittenTensors(), map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "go_written.safetensors")
	if *update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("Write output differs from %s (run with -update and re-check with fixtures.py check)", path)
	}
}

// TestReferenceBytes compares with byte strings from the reference
// implementation's own unit tests.
func TestReferenceBytes(t *testing.T) {
	data := Float32("attn.0", []int{1, 2, 3}, []float32{0, 1, 2, 3, 4, 5})
	var buf bytes.Buffer
	if _, err := Write(&buf, []Tensor{data}, nil); err != nil {
		t.Fatal(err)
	}
	wantHeader := `{"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}}`
	if got := buf.Bytes(); binary.LittleEndian.Uint64(got) != 64 || string(got[8:72]) != wantHeader || len(got) != 8+64+24 {
		t.Errorf("attn.0: got %q", got)
	}

	buf.Reset()
	data.Name, data.Shape = "attn0", []int{1, 1, 2, 3}
	Write(&buf, []Tensor{data}, nil)
	wantHeader = `{"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}}       `
	if got := buf.Bytes(); binary.LittleEndian.Uint64(got) != 72 || string(got[8:80]) != wantHeader {
		t.Errorf("attn0 (padded): got %q", got)
	}

	buf.Reset()
	Write(&buf, nil, nil)
	if want := "\x08\x00\x00\x00\x00\x00\x00\x00{}      "; buf.String() != want {
		t.Errorf("empty: got %q want %q", buf.String(), want)
	}
	buf.Reset()
	Write(&buf, nil, map[string]string{"framework": "pt"})
	if want := "\x28\x00\x00\x00\x00\x00\x00\x00" + `{"__metadata__":{"framework":"pt"}}     `; buf.String() != want {
		t.Errorf("empty+metadata: got %q want %q", buf.String(), want)
	}
	// Both parse back.
	parseBytes(t, buf.Bytes())
}

func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	dtypes := []DType{BOOL, U8, I8, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64, F8E4M3}
	var ts []Tensor
	for i := range 40 {
		dt := dtypes[rng.IntN(len(dtypes))]
		shape := make([]int, rng.IntN(4))
		for j := range shape {
			shape[j] = rng.IntN(5)
		}
		data := make([]byte, NumElements(shape)*dt.Size())
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		ts = append(ts, Tensor{Name: string(rune('a'+i%26)) + strings.Repeat("x", i), DType: dt, Shape: shape, Data: data})
	}
	meta := map[string]string{"b": "2", "a": "1\n\"quoted\""}
	var buf bytes.Buffer
	n, err := Write(&buf, ts, meta)
	if err != nil {
		t.Fatal(err)
	}
	if size, _ := Size(ts, meta); n != int64(buf.Len()) || size != n {
		t.Errorf("Write returned %d, Size %d, wrote %d", n, size, buf.Len())
	}
	hl := binary.LittleEndian.Uint64(buf.Bytes())
	if hl%8 != 0 {
		t.Errorf("header length %d not a multiple of 8", hl)
	}
	r := parseBytes(t, buf.Bytes())
	if !reflect.DeepEqual(r.Metadata(), meta) {
		t.Errorf("metadata %v", r.Metadata())
	}
	for _, want := range ts {
		info, ok := r.Lookup(want.Name)
		if !ok {
			t.Fatalf("%q missing", want.Name)
		}
		// Each tensor's data is aligned to its element size in the file.
		if (8+int64(hl)+info.Begin)%int64(want.DType.Size()) != 0 {
			t.Errorf("%q (%s) at unaligned file offset %d", want.Name, want.DType, 8+int64(hl)+info.Begin)
		}
		got, err := r.ReadRaw(want.Name)
		if err != nil {
			t.Fatal(err)
		}
		if info.DType != want.DType || !reflect.DeepEqual(info.Shape, want.Shape) && len(want.Shape) > 0 || !bytes.Equal(got, want.Data) {
			t.Errorf("%q: %s %v, want %s %v (data equal %v)", want.Name, info.DType, info.Shape, want.DType, want.Shape, bytes.Equal(got, want.Data))
		}
	}
}

// halfRef is the plain definition of IEEE binary16.
func halfRef(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e, m := int(h>>10)&31, float64(h&0x3ff)
	switch e {
	case 31:
		if m != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	case 0:
		return sign * math.Ldexp(m/1024, -14)
	}
	return sign * math.Ldexp(1+m/1024, e-15)
}

func TestHalfToFloat32(t *testing.T) {
	for h := range 1 << 16 {
		got, want := halfToFloat32(uint16(h)), halfRef(uint16(h))
		if math.IsNaN(want) {
			if !math.IsNaN(float64(got)) {
				t.Fatalf("%#04x: got %v, want NaN", h, got)
			}
			continue
		}
		if float64(got) != want || math.Signbit(float64(got)) != math.Signbit(want) {
			t.Fatalf("%#04x: got %v, want %v", h, got, want)
		}
	}
}

func TestReadFloat32Conversions(t *testing.T) {
	le := binary.LittleEndian
	bf := make([]byte, 4)
	le.PutUint16(bf, 0x3f80)     // 1.0
	le.PutUint16(bf[2:], 0xc040) // -3.0
	f64 := make([]byte, 16)
	le.PutUint64(f64, math.Float64bits(0.5))
	le.PutUint64(f64[8:], math.Float64bits(-1e10))
	i64 := make([]byte, 8)
	var buf bytes.Buffer
	Write(&buf, []Tensor{
		{Name: "bf", DType: BF16, Shape: []int{2}, Data: bf},
		{Name: "f64", DType: F64, Shape: []int{2}, Data: f64},
		{Name: "i", DType: I64, Shape: []int{1}, Data: i64},
	}, nil)
	r := parseBytes(t, buf.Bytes())
	got := make([]float32, 2)
	if err := r.ReadFloat32("bf", got); err != nil || got[0] != 1 || got[1] != -3 {
		t.Errorf("bf16: %v %v", got, err)
	}
	if err := r.ReadFloat32("f64", got); err != nil || got[0] != 0.5 || got[1] != -1e10 {
		t.Errorf("f64: %v %v", got, err)
	}
	var fe *FormatError
	if err := r.ReadFloat32("i", got[:1]); !errors.As(err, &fe) || fe.Tensor != "i" {
		t.Errorf("I64 as float32: %v", err)
	}
	if err := r.ReadFloat32("bf", got[:1]); !errors.As(err, &fe) || !strings.Contains(err.Error(), "destination holds 1") {
		t.Errorf("short dst: %v", err)
	}
	if err := r.ReadFloat32("nope", got); !errors.As(err, &fe) || !strings.Contains(err.Error(), "no such tensor") {
		t.Errorf("missing: %v", err)
	}
}

// TestReadFloat32Chunks reads an F16 tensor longer than the conversion chunk.
func TestReadFloat32Chunks(t *testing.T) {
	n := 1<<16*2 + 123
	data := make([]byte, 2*n)
	for i := range n {
		binary.LittleEndian.PutUint16(data[2*i:], uint16(i)&0x7bff) // finite halves
	}
	var buf bytes.Buffer
	Write(&buf, []Tensor{{Name: "h", DType: F16, Shape: []int{n}, Data: data}}, nil)
	got := make([]float32, n)
	if err := parseBytes(t, buf.Bytes()).ReadFloat32("h", got); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if want := float32(halfRef(uint16(i) & 0x7bff)); got[i] != want {
			t.Fatalf("element %d = %v, want %v", i, got[i], want)
		}
	}
}

func TestWriteErrors(t *testing.T) {
	ok := Float32("w", []int{2}, []float32{1, 2})
	cases := []struct {
		name string
		ts   []Tensor
		meta map[string]string
		want string
	}{
		{"duplicate", []Tensor{ok, ok}, nil, `tensor "w": duplicate name`},
		{"empty name", []Tensor{{DType: F32}}, nil, "empty name"},
		{"reserved", []Tensor{{Name: "__metadata__", DType: F32, Data: make([]byte, 4)}}, nil, "reserved"},
		{"dtype", []Tensor{{Name: "x", DType: "F99", Data: nil}}, nil, `unknown dtype "F99"`},
		{"length", []Tensor{{Name: "x", DType: F32, Shape: []int{3}, Data: make([]byte, 8)}}, nil, "needs 12 bytes, data has 8"},
		{"negative", []Tensor{{Name: "x", DType: F32, Shape: []int{-1}}}, nil, "invalid shape"},
		{"overflow", []Tensor{{Name: "x", DType: F32, Shape: []int{1 << 40, 1 << 40}}}, nil, "invalid shape"},
		{"utf8 name", []Tensor{{Name: "\xff", DType: F32, Data: make([]byte, 4)}}, nil, "UTF-8"},
		{"utf8 meta", nil, map[string]string{"k": "\xff"}, "UTF-8"},
	}
	for _, c := range cases {
		var buf bytes.Buffer
		_, err := Write(&buf, c.ts, c.meta)
		var fe *FormatError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
		if buf.Len() != 0 {
			t.Errorf("%s: wrote %d bytes before failing", c.name, buf.Len())
		}
	}
}

// file builds a safetensors file from a raw header string and data size.
func file(header string, data int) []byte {
	b := make([]byte, 8, 8+len(header)+data)
	binary.LittleEndian.PutUint64(b, uint64(len(header)))
	b = append(b, header...)
	return append(b, make([]byte, data)...)
}

func TestParseErrors(t *testing.T) {
	f32 := func(name string, shape string, b, e int) string {
		return `"` + name + `":{"dtype":"F32","shape":` + shape + `,"data_offsets":[` + itoa(b) + `,` + itoa(e) + `]}`
	}
	good := file("{"+f32("a", "[2]", 0, 8)+","+f32("b", "[1]", 8, 12)+"}", 12)
	parseBytes(t, good)             // the baseline parses
	parseBytes(t, file(" \n{}", 0)) // leading whitespace is valid JSON, as in the reference

	huge := make([]byte, 16)
	binary.LittleEndian.PutUint64(huge, 1<<40)
	over := make([]byte, 16)
	binary.LittleEndian.PutUint64(over, 9)
	cases := []struct {
		name, tensor, want string
		data               []byte
	}{
		{"tiny", "", "shorter than the 8-byte header length", []byte{1, 2, 3}},
		{"header beyond file", "", "does not fit in a file of 16 bytes", over},
		{"header limit", "", "exceeds the format's limit", huge},
		{"zero header", "", "header length is 0", make([]byte, 8)},
		{"truncated", "b", "runs past the end of the data section (11 bytes; truncated?)", good[:len(good)-1]},
		{"extra data", "", "tensors cover 12 bytes of data but the file holds 13", append(append([]byte{}, good...), 0)},
		{"not utf8", "", "not valid UTF-8", file("{\"\xff\":1}", 0)},
		{"not an object", "", "does not start with '{'", file(`[1,2]`, 0)},
		{"bad json", "a", "header entry", file(`{"a":`, 0)},
		{"bad key", "", "header JSON", file(`{1:2}`, 0)},
		{"trailing", "", "trailing data", file(`{}  x`, 0)},
		{"two objects", "", "trailing data", file(`{}{}`, 0)},
		{"duplicate", "a", "duplicate name", file("{"+f32("a", "[1]", 0, 4)+","+f32("a", "[1]", 4, 8)+"}", 8)},
		{"dup metadata", "", `duplicate "__metadata__"`, file(`{"__metadata__":{},"__metadata__":{}}`, 0)},
		{"metadata type", "", "want an object of strings", file(`{"__metadata__":{"a":1}}`, 0)},
		{"unknown dtype", "a", `unknown dtype "F4"`, file(`{"a":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}}`, 1)},
		{"missing field", "a", `needs "dtype", "shape" and "data_offsets"`, file(`{"a":{"dtype":"F32","shape":[1]}}`, 4)},
		{"entry not object", "a", "header entry", file(`{"a":5}`, 0)},
		{"negative dim", "a", "header entry", file(`{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, 4)},
		{"fractional dim", "a", "header entry", file(`{"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}}`, 4)},
		{"huge dim", "a", "too large", file(`{"a":{"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,4]}}`, 4)},
		{"overflow", "a", "too large", file(`{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}}`, 4)},
		{"three offsets", "a", "data_offsets has 3 values", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}}`, 4)},
		{"reversed offsets", "a", "end before they begin", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}}`, 4)},
		{"size mismatch", "a", "needs 8 bytes but data_offsets [0, 4] span 4", file("{"+f32("a", "[2]", 0, 4)+"}", 4)},
		{"hole", "b", "a hole", file("{"+f32("a", "[1]", 0, 4)+","+f32("b", "[1]", 8, 12)+"}", 12)},
		{"not from zero", "a", "a hole", file("{"+f32("a", "[1]", 4, 8)+"}", 8)},
		{"overlap", "b", "overlaps", file("{"+f32("a", "[2]", 0, 8)+","+f32("b", "[1]", 4, 8)+"}", 8)},
		{"past end", "a", "runs past the end", file("{"+f32("a", "[4]", 0, 16)+"}", 8)},
	}
	for _, c := range cases {
		_, err := Parse(bytes.NewReader(c.data), int64(len(c.data)), "bad.safetensors")
		var fe *FormatError
		if !errors.As(err, &fe) {
			t.Errorf("%s: err = %v, want a *FormatError", c.name, err)
			continue
		}
		if fe.File != "bad.safetensors" || fe.Tensor != c.tensor || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %q (tensor %q), want tensor %q and %q", c.name, err, fe.Tensor, c.tensor, c.want)
		}
	}
}

func itoa(i int) string { return string(appendInt(nil, i)) }

func appendInt(b []byte, i int) []byte {
	if i >= 10 {
		b = appendInt(b, i/10)
	}
	return append(b, byte('0'+i%10))
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "missing.safetensors")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	p := filepath.Join(t.TempDir(), "trunc.safetensors")
	os.WriteFile(p, []byte{200, 0, 0, 0, 0, 0, 0, 0, '{'}, 0o644)
	_, err := Open(p)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("truncated: %v", err)
	}
}

// TestZeroSizedTensors: empty tensors may share an offset, in any order.
func TestZeroSizedTensors(t *testing.T) {
	b := file(`{"z2":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"z1":{"dtype":"I64","shape":[3,0],"data_offsets":[4,4]}}`, 4)
	r := parseBytes(t, b)
	var names []string
	for _, info := range r.Tensors() {
		names = append(names, info.Name)
	}
	if !reflect.DeepEqual(names, []string{"a", "z1", "z2"}) {
		t.Errorf("order %v", names)
	}
	got, err := r.ReadRaw("z1")
	if err != nil || len(got) != 0 {
		t.Errorf("z1: %v %v", got, err)
	}
}

// TestDecodeFloat32 covers the conversion path big-endian hosts take for F32.
func TestDecodeFloat32(t *testing.T) {
	src := make([]byte, 8)
	binary.LittleEndian.PutUint32(src, math.Float32bits(1.5))
	binary.LittleEndian.PutUint32(src[4:], math.Float32bits(-2.25))
	dst := make([]float32, 2)
	decodeFloat32(F32, src, dst)
	if dst[0] != 1.5 || dst[1] != -2.25 {
		t.Errorf("got %v", dst)
	}
}
