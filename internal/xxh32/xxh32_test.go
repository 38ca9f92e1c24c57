package xxh32

import "testing"

// TestKnownVectors holds Checksum to the reference implementation. The
// values are libxxhash 0.8.4's, through python-xxhash 3.x:
//
//	xxhash.xxh32_intdigest(data, seed)
//
// The seed-0 values of "", "a", "abc" and the spammish sentence are also
// xxHash's published sanity values; 0x9747b28c is lz4-java's seed.
func TestKnownVectors(t *testing.T) {
	long := make([]byte, 0, 771)
	for range 3 {
		for i := range 256 {
			long = append(long, byte(i))
		}
	}
	long = append(long, "xyz"...)
	inputs := [][]byte{nil, []byte("a"), []byte("abc"), []byte("Nobody inspects the spammish repetition"), long, []byte("0123456789abcdef")}
	want := map[uint32][]uint32{
		0:          {0x02cc5d05, 0x550d7456, 0x32d153ff, 0xe2293b2f, 0xbaa54da9, 0xc2c45b69},
		0x9747b28c: {0x8d3b42d8, 0x12b7e114, 0x4d4cb222, 0x70b91719, 0xc71a6583, 0x59ac4ea7},
	}
	for seed, ws := range want {
		for i, in := range inputs {
			if got := Checksum(in, seed); got != ws[i] {
				t.Errorf("Checksum(%d bytes %.12q, %#x) = %#08x, want %#08x", len(in), in, seed, got, ws[i])
			}
		}
	}
}
