//go:build ignore

// gen_corpus writes the committed seed corpus of FuzzParse to
// testdata/fuzz/FuzzParse. Run from checkpoint/safetensors:
//
//	go run testdata/gen_corpus.go
package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/voxtrain/voxtrain/checkpoint/safetensors"
)

func raw(header string, data int) []byte {
	b := make([]byte, 8, 8+len(header)+data)
	binary.LittleEndian.PutUint64(b, uint64(len(header)))
	b = append(b, header...)
	return append(b, make([]byte, data)...)
}

func main() {
	dir := filepath.Join("testdata", "fuzz", "FuzzParse")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	seeds := map[string][]byte{}
	for _, name := range []string{"python_written", "go_written"} {
		b, err := os.ReadFile(filepath.Join("testdata", name+".safetensors"))
		if err != nil {
			log.Fatal(err)
		}
		seeds[name] = b
		seeds[name+"_truncated"] = b[:len(b)*2/3]
		seeds[name+"_header_only"] = b[:8+binary.LittleEndian.Uint64(b)]
	}
	var buf bytes.Buffer
	safetensors.Write(&buf, []safetensors.Tensor{
		safetensors.Float32("w", []int{2, 2}, []float32{1, 2, 3, 4}),
		{Name: "h", DType: safetensors.F16, Shape: []int{3}, Data: []byte{0, 60, 0, 188, 255, 124}},
		{Name: "b", DType: safetensors.BF16, Shape: []int{1}, Data: []byte{128, 63}},
		{Name: "i", DType: safetensors.I64, Shape: []int{}, Data: make([]byte, 8)},
		{Name: "e", DType: safetensors.U8, Shape: []int{0, 4}},
	}, map[string]string{"format": "pt", "step": "12"})
	seeds["mixed"] = buf.Bytes()
	seeds["empty_object"] = raw("{}      ", 0)
	seeds["metadata_only"] = raw(`{"__metadata__":{"a":"b"}}`, 0)
	seeds["zero_sized_shared"] = raw(`{"z":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, 4)
	seeds["duplicate"] = raw(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8)
	seeds["overflow_shape"] = raw(`{"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}}`, 8)
	seeds["huge_header_len"] = []byte{255, 255, 255, 255, 255, 255, 255, 127, '{', '}'}
	seeds["zero_header_len"] = make([]byte, 8) // found by fuzzing: ReadAt of 0 bytes at EOF
	seeds["hole"] = raw(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8)
	for name, b := range seeds {
		content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Printf("wrote %d seeds to %s\n", len(seeds), dir)
}
