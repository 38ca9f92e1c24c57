package zarr

import (
	"bytes"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// TestZstdExactInPlace: a blosc split with zstdSlack bytes of capacity
// after it (and more) decodes in place, writing nothing past that slack;
// one without decodes right through the copy.
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
		if !spare {
			continue // big[n:] is past dst's capacity: unreachable
		}
		// The capacity reaches 4 KiB further: the decoder may use only
		// zstdSlack of it (a valid stream).
		for i := n + zstdSlack; i < len(big); i++ {
			if big[i] != 0xa5 {
				t.Fatalf("byte %d past the split (of %d) and its slack written", i, n)
			}
		}
	}
}
