package testutil

import (
	"testing"

	"github.com/voxtrain/voxtrain/checkpoint/safetensors"
	"github.com/voxtrain/voxtrain/nn"
)

// ReadSafetensors reads every tensor of a safetensors file as float32
// (fixtures, checkpoints' model.safetensors), by name.
func ReadSafetensors(t testing.TB, path string) map[string]nn.HostTensor {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]nn.HostTensor{}
	for _, info := range f.Tensors() {
		d := make([]float32, info.NumElements())
		if err := f.ReadFloat32(info.Name, d); err != nil {
			t.Fatal(err)
		}
		out[info.Name] = nn.HostTensor{Name: info.Name, Shape: info.Shape, Data: d}
	}
	return out
}
