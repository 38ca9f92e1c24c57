package zarr

import (
	"bytes"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// TestZstdExactInPlace: a blosc split with zstdSlack bytes of capacity
// after it decodes in place, writing nothing past that slack; one
// without (its neighbour's bytes follow) decodes through a copy and
// leaves the neighbour as it was.
func TestZstdExactInPlace(t *testing.T) {
	data := make([]byte, 300<<10) // past one 128 KiB zstd block: the fast path's tail
	for i := range data {
		data[i] = byte(i*i>>7) ^ byte(i>>9)
	}
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	frame := enc.EncodeAll(data, nil)
	n := len(data)
	for _, spare := range []bool{false, true} {
		big := make([]byte, n+4096)
		for i := range big {
			big[i] = 0xa5
		}
		dst := big[:n:n]
		if spare {
			dst = big[:n]
		}
		if err := zstdExact(frame, dst); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(big[:n], data) {
			t.Fatalf("spare %v: decoded bytes differ", spare)
		}
		from := n
		if spare {
			from = n + zstdSlack // scratch by the convention
		}
		for i := from; i < len(big); i++ {
			if big[i] != 0xa5 {
				t.Fatalf("spare %v: byte %d past the split (of %d) written", spare, i, n)
			}
		}
	}
}
