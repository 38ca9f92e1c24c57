package torchpt

import (
	"bytes"
	"os"
	"testing"
)

// FuzzRead: any bytes — a damaged zip, a hostile data.pkl — give tensors
// or an error, never a panic, a hang or an allocation beyond the input's
// claims. The seeds are the fixtures and their data.pkl alone.
func FuzzRead(f *testing.F) {
	// The small fixtures: torch_init.pt's 100 KB only slow the mutator.
	seeds := []string{"testdata/state_dict.pt", "testdata/checkpoint.pth", "testdata/model.pt", "testdata/tensor.pt", "testdata/legacy.pt"}
	for _, s := range seeds {
		if b, err := os.ReadFile(s); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		Read(bytes.NewReader(b), int64(len(b)), "fuzz.pt")
		unpickle(b)
	})
}
