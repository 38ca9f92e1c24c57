package safetensors

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzParse feeds arbitrary bytes to Parse. It must never panic, never
// read outside the file, and whatever it accepts must survive a round trip
// through Write and Parse with the same tensors and metadata.
// `go test` replays testdata/fuzz/FuzzParse (made by testdata/gen_corpus.go);
// `go test -fuzz FuzzParse ./checkpoint/safetensors` explores further.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"python_written.safetensors", "go_written.safetensors"} {
		if b, err := os.ReadFile(filepath.Join("testdata", name)); err == nil {
			f.Add(b)
		}
	}
	f.Add(file(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 8))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse(bytes.NewReader(data), int64(len(data)), "fuzz")
		if err != nil {
			if _, ok := err.(*FormatError); !ok {
				t.Fatalf("error %v (%T) is not a *FormatError", err, err)
			}
			return
		}
		var ts []Tensor
		var total int64
		for _, info := range r.Tensors() {
			raw, err := r.ReadRaw(info.Name)
			if err != nil {
				t.Fatalf("ReadRaw(%q) after a successful Parse: %v", info.Name, err)
			}
			total += int64(len(raw))
			ts = append(ts, Tensor{Name: info.Name, DType: info.DType, Shape: info.Shape, Data: raw})
			if info.DType == F32 || info.DType == F16 || info.DType == BF16 || info.DType == F64 {
				if err := r.ReadFloat32(info.Name, make([]float32, info.NumElements())); err != nil {
					t.Fatalf("ReadFloat32(%q): %v", info.Name, err)
				}
			}
		}
		if total > int64(len(data)) {
			t.Fatalf("tensors hold %d bytes, file has %d", total, len(data))
		}
		var buf bytes.Buffer
		if _, err := Write(&buf, ts, r.Metadata()); err != nil {
			t.Fatalf("Write of parsed tensors: %v", err)
		}
		r2, err := Parse(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "rewritten")
		if err != nil {
			t.Fatalf("Parse of rewritten file: %v", err)
		}
		if len(r.Metadata()) > 0 && !reflect.DeepEqual(r.Metadata(), r2.Metadata()) {
			t.Fatalf("metadata %v became %v", r.Metadata(), r2.Metadata())
		}
		if len(r2.Tensors()) != len(ts) {
			t.Fatalf("%d tensors became %d", len(ts), len(r2.Tensors()))
		}
		for _, want := range ts {
			got, ok := r2.Lookup(want.Name)
			if !ok || got.DType != want.DType || !reflect.DeepEqual(got.Shape, want.Shape) {
				t.Fatalf("tensor %q: %+v became %+v", want.Name, want, got)
			}
			raw, _ := r2.ReadRaw(want.Name)
			if !bytes.Equal(raw, want.Data) {
				t.Fatalf("tensor %q: data changed", want.Name)
			}
		}
	})
}
