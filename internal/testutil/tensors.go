package testutil

import (
	"math"
	"testing"

	"github.com/voxtrain/voxtrain/nn"
)

// SameBits fails t unless a and b hold the same tensors, in order, with
// bit-identical values (exact resume and determinism tests); what names
// them in the message.
func SameBits(t testing.TB, what string, a, b []nn.HostTensor) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d vs %d tensors", what, len(a), len(b))
	}
	for i := range a {
		if a[i].Name != b[i].Name || len(a[i].Data) != len(b[i].Data) {
			t.Fatalf("%s: tensor %d is %s (%d values) vs %s (%d)", what, i, a[i].Name, len(a[i].Data), b[i].Name, len(b[i].Data))
		}
		for j := range a[i].Data {
			if math.Float32bits(a[i].Data[j]) != math.Float32bits(b[i].Data[j]) {
				t.Fatalf("%s: %s[%d] = %v vs %v", what, a[i].Name, j, a[i].Data[j], b[i].Data[j])
			}
		}
	}
}
