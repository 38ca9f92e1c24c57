package floatbytes

import (
	"encoding/binary"
	"math"
	"testing"
)

func TestViews(t *testing.T) {
	f := []float32{1, -2.5, float32(math.Inf(1))}
	b := Bytes(f)
	if len(b) != 12 {
		t.Fatalf("%d bytes", len(b))
	}
	if LittleEndian {
		for i, v := range f {
			if got := math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])); got != v {
				t.Errorf("value %d reads back as %v", i, got)
			}
		}
	}
	g := Float32s(b)
	g[1] = 7
	if f[1] != 7 || len(g) != 3 {
		t.Errorf("the views do not share memory: %v %v", f, g)
	}
	if Bytes(nil) != nil || Float32s([]byte{1, 2}) != nil {
		t.Error("empty views")
	}
}
