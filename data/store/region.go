package store

import (
	"fmt"
	"math"

	"github.com/voxtrain/voxtrain/internal/floatbytes"
)

// ReadRegion fills the box [lo, hi) (D, H, W) of every image channel into
// img (one slice per channel, box-sized, W fastest) and of the label into
// lbl (nil: skip the label), decompressing only the chunks the box
// overlaps.
func (c *Case) ReadRegion(lo, hi [3]int, img [][]float32, lbl []uint8, sc *Scratch) error {
	var bs [3]int
	for a := range 3 {
		if lo[a] < 0 || hi[a] > c.Shape[a] || lo[a] >= hi[a] {
			return fmt.Errorf("store: %s: region [%v, %v) is outside the volume %v", c.path, lo, hi, c.Shape)
		}
		bs[a] = hi[a] - lo[a]
	}
	vox := bs[0] * bs[1] * bs[2]
	if len(img) != c.Channels {
		return fmt.Errorf("store: %s: %d channel buffers for %d channels", c.path, len(img), c.Channels)
	}
	for ch := range img {
		if len(img[ch]) != vox {
			return fmt.Errorf("store: %s: channel buffer of %d voxels for a region of %d", c.path, len(img[ch]), vox)
		}
	}
	if lbl != nil && (!c.HasLabel || len(lbl) != vox) {
		return fmt.Errorf("store: %s: label buffer of %d voxels for a region of %d (has label: %v)", c.path, len(lbl), vox, c.HasLabel)
	}
	g := c.g
	var clo, chi [3]int
	for a := range 3 {
		clo[a] = lo[a] / g.chunk
		chi[a] = (hi[a] - 1) / g.chunk
	}
	narr := c.Channels
	if lbl != nil {
		narr++
	}
	for arr := 0; arr < narr; arr++ {
		for i := clo[0]; i <= chi[0]; i++ {
			for j := clo[1]; j <= chi[1]; j++ {
				// Chunks along x of one row are contiguous in the file:
				// one read for the whole run (none from a memory map).
				base := arr*g.count() + (i*g.n[1]+j)*g.n[2]
				first, last := base+clo[2], base+chi[2]
				start := c.off[first]
				end := c.off[last] + int64(c.size[last])
				buf := c.mm
				if buf != nil {
					buf = buf[start:end]
				} else {
					if int64(cap(sc.comp)) < end-start {
						sc.comp = make([]byte, end-start)
					}
					buf = sc.comp[:end-start]
					if _, err := c.f.ReadAt(buf, start); err != nil {
						return fmt.Errorf("store: read %s: %w", c.path, err)
					}
				}
				for k := clo[2]; k <= chi[2]; k++ {
					idx := base + k
					o := c.off[idx] - start
					data := buf[o : o+int64(c.size[idx])]
					if c.codec == codecRawID {
						sc.Chunks++
						sc.Bytes += int64(len(data))
					} else {
						var err error
						data, err = sc.decode(c.codec&^shuffleBit, data, c.chunkBytes(arr, idx-arr*g.count()))
						if err != nil {
							return fmt.Errorf("store: %s: chunk %d of array %d: %w", c.path, idx-arr*g.count(), arr, err)
						}
					}
					clo3, chi3 := g.box(i, j, k)
					switch {
					case arr < c.Channels && c.codec&shuffleBit != 0:
						scatterShuffled(img[arr], bs, lo, hi, data, clo3, chi3)
					case arr < c.Channels:
						scatter(img[arr], bs, lo, hi, floatbytes.Float32s(data), clo3, chi3)
					default:
						scatter(lbl, bs, lo, hi, data, clo3, chi3)
					}
				}
			}
		}
	}
	return nil
}

// chunkBytes is the raw size of chunk ci (z slowest, x fastest) of array
// arr.
func (c *Case) chunkBytes(arr, ci int) int {
	k := ci % c.g.n[2]
	j := ci / c.g.n[2] % c.g.n[1]
	i := ci / (c.g.n[1] * c.g.n[2])
	lo, hi := c.g.box(i, j, k)
	n := (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2])
	if arr < c.Channels {
		return 4 * n
	}
	return n
}

// overlap returns the part [a, b) of chunk [clo, chi) that lies in the
// region [lo, hi).
func overlap(lo, hi, clo, chi [3]int) (a, b [3]int) {
	for i := range 3 {
		a[i] = max(lo[i], clo[i])
		b[i] = min(hi[i], chi[i])
	}
	return a, b
}

// scatter copies the part of chunk [clo, chi) (data packed, W fastest)
// that lies in the region [lo, hi) into dst (region-shaped bs).
func scatter[T any](dst []T, bs, lo, hi [3]int, data []T, clo, chi [3]int) {
	a, b := overlap(lo, hi, clo, chi)
	cw, ch := chi[2]-clo[2], chi[1]-clo[1]
	w := b[2] - a[2]
	for z := a[0]; z < b[0]; z++ {
		for y := a[1]; y < b[1]; y++ {
			s := ((z-clo[0])*ch+(y-clo[1]))*cw + (a[2] - clo[2])
			d := ((z-lo[0])*bs[1]+(y-lo[1]))*bs[2] + (a[2] - lo[2])
			copy(dst[d:d+w], data[s:s+w])
		}
	}
}

// scatterShuffled is scatter for a byte-shuffled float32 chunk: it
// reassembles each float from its four planes on the way. Its row loop is
// scatter's with the copy written out, kept apart so that scatter's rows
// stay one copy call each.
func scatterShuffled(dst []float32, bs, lo, hi [3]int, data []byte, clo, chi [3]int) {
	a, b := overlap(lo, hi, clo, chi)
	n := len(data) / 4
	p0, p1, p2, p3 := data[:n], data[n:2*n], data[2*n:3*n], data[3*n:]
	cw, ch := chi[2]-clo[2], chi[1]-clo[1]
	w := b[2] - a[2]
	for z := a[0]; z < b[0]; z++ {
		for y := a[1]; y < b[1]; y++ {
			s := ((z-clo[0])*ch+(y-clo[1]))*cw + (a[2] - clo[2])
			d := ((z-lo[0])*bs[1]+(y-lo[1]))*bs[2] + (a[2] - lo[2])
			out := dst[d : d+w]
			q0, q1, q2, q3 := p0[s:s+w], p1[s:s+w], p2[s:s+w], p3[s:s+w]
			q1, q2, q3 = q1[:len(q0)], q2[:len(q0)], q3[:len(q0)] // one bounds check for all
			for x, b0 := range q0 {
				out[x] = math.Float32frombits(uint32(b0) | uint32(q1[x])<<8 | uint32(q2[x])<<16 | uint32(q3[x])<<24)
			}
		}
	}
}

// DecodeAll reads a whole case (for validation and tests): image channels
// and label (nil without one).
func (c *Case) DecodeAll(sc *Scratch) ([][]float32, []uint8, error) {
	vox := c.Shape[0] * c.Shape[1] * c.Shape[2]
	img := make([][]float32, c.Channels)
	for i := range img {
		img[i] = make([]float32, vox)
	}
	var lbl []uint8
	if c.HasLabel {
		lbl = make([]uint8, vox)
	}
	err := c.ReadRegion([3]int{}, c.Shape, img, lbl, sc)
	return img, lbl, err
}
