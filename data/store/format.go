package store

import "github.com/voxtrain/voxtrain/internal/floatbytes"

// Version is the store format version.
const Version = 1

// magic starts every case file.
const magic = "VXSTORE1"

// rawAlign aligns a raw case file's first chunk (and so every float32
// chunk, whose sizes are multiples of 4) for in-place float32 views.
const rawAlign = 64

// grid is the chunk grid of a volume.
type grid struct {
	shape [3]int
	chunk int
	n     [3]int // chunks per axis
}

// newGrid cuts a volume of shape into chunks of edge chunk.
func newGrid(shape [3]int, chunk int) grid {
	g := grid{shape: shape, chunk: chunk}
	for i := range g.n {
		g.n[i] = (shape[i] + chunk - 1) / chunk
	}
	return g
}

// count is the number of chunks.
func (g grid) count() int { return g.n[0] * g.n[1] * g.n[2] }

// box returns chunk (i, j, k)'s voxel range.
func (g grid) box(i, j, k int) (lo, hi [3]int) {
	lo = [3]int{i * g.chunk, j * g.chunk, k * g.chunk}
	for a := range 3 {
		hi[a] = min(lo[a]+g.chunk, g.shape[a])
	}
	return lo, hi
}

// f32bytes views float32s as their little-endian bytes.
func f32bytes(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	if !floatbytes.LittleEndian {
		panic("store: big-endian hosts are not supported")
	}
	return floatbytes.Bytes(f)
}
