package infer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/voxtrain/voxtrain/volume"
)

// patchMix is a network whose logits depend on the whole patch (its
// mean) and on the position in the patch, so a voxel's blockwise value
// matches the whole-volume run only when the same windows, at the same
// places, cover it. Each patch's output depends on that patch alone.
type patchMix struct {
	inC, outC int
	p         [3]int
}

func (m patchMix) Forward(n int, in, out []float32) error {
	pv := m.p[0] * m.p[1] * m.p[2]
	for i := range n {
		var mean float32
		for c := range m.inC {
			for _, v := range in[(i*m.inC+c)*pv : (i*m.inC+c+1)*pv] {
				mean += v
			}
		}
		mean /= float32(m.inC * pv)
		for k := range m.outC {
			o := out[(i*m.outC+k)*pv : (i*m.outC+k+1)*pv]
			for j := range o {
				x := in[(i*m.inC+k%m.inC)*pv+j]
				o[j] = x*float32(k+1) - mean*float32(k) + float32(j%(k+5))*0.01
			}
		}
	}
	return nil
}

// TestPredictBlockMatchesPredict predicts volumes block by block and
// compares with Predict on the whole: equal bit for bit, with mirroring
// and batches that group the windows differently, for a volume larger
// than the patch, one thinner than the patch along an axis (Predict's
// padding) and blocks that do not divide the shape.
func TestPredictBlockMatchesPredict(t *testing.T) {
	for _, tc := range []struct {
		shape, block, patch [3]int
		batch               int
		mirror              []int
	}{
		{[3]int{23, 30, 27}, [3]int{8, 16, 10}, [3]int{8, 12, 10}, 3, []int{0, 2}},
		{[3]int{6, 33, 20}, [3]int{6, 8, 8}, [3]int{8, 8, 8}, 1, nil},
		{[3]int{17, 17, 17}, [3]int{32, 32, 32}, [3]int{8, 8, 8}, 4, []int{0, 1, 2}},
	} {
		t.Run(fmt.Sprint(tc.shape, tc.block), func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			n := tc.shape[0] * tc.shape[1] * tc.shape[2]
			img := [][]float32{make([]float32, n), make([]float32, n)}
			for _, ch := range img {
				for i := range ch {
					ch[i] = r.Float32()*4 - 2
				}
			}
			net := patchMix{inC: 2, outC: 3, p: tc.patch}
			cfg := Window{Patch: tc.patch, Overlap: 0.5, BatchSize: tc.batch, MirrorAxes: tc.mirror}
			want, err := Predict(context.Background(), net, img, tc.shape, 3, cfg)
			if err != nil {
				t.Fatal(err)
			}
			g, err := NewBlockGrid(tc.shape, tc.block, tc.patch, 0.5)
			if err != nil {
				t.Fatal(err)
			}
			read := func(box volume.Box, dst [][]float32) error {
				if !volume.Whole(tc.shape).Contains(box) {
					return fmt.Errorf("read %v outside %v", box, tc.shape)
				}
				s := box.Size()
				for c := range dst {
					if len(dst[c]) != box.Voxels() {
						return errors.New("wrong destination size")
					}
					for z := range s[0] {
						for y := range s[1] {
							o := ((box.Lo[0]+z)*tc.shape[1]+box.Lo[1]+y)*tc.shape[2] + box.Lo[2]
							copy(dst[c][(z*s[1]+y)*s[2]:][:s[2]], img[c][o:o+s[2]])
						}
					}
				}
				return nil
			}
			covered := make([]int, n)
			for i := range g.NumBlocks() {
				b := g.Box(i)
				got, err := PredictBlock(context.Background(), net, g, b, 2, 3, cfg, read)
				if err != nil {
					t.Fatal(err)
				}
				bs := b.Size()
				for c := range 3 {
					for z := range bs[0] {
						for y := range bs[1] {
							for x := range bs[2] {
								v := ((b.Lo[0]+z)*tc.shape[1]+b.Lo[1]+y)*tc.shape[2] + b.Lo[2] + x
								if c == 0 {
									covered[v]++
								}
								if g, w := got[((c*bs[0]+z)*bs[1]+y)*bs[2]+x], want[c*n+v]; g != w {
									t.Fatalf("block %v channel %d voxel (%d,%d,%d): %v, whole volume %v", b, c, b.Lo[0]+z, b.Lo[1]+y, b.Lo[2]+x, g, w)
								}
							}
						}
					}
				}
			}
			for v, k := range covered {
				if k != 1 {
					t.Fatalf("voxel %d in %d blocks, want 1", v, k)
				}
			}
		})
	}
}

// TestBlockGridBounded: the region a block reads is at most the block
// plus patch−1 on each side, also for volumes of 10^9 to 10^11 voxels, and
// BlockBytes is within the bound of block and halo alone, independent of
// the volume's size.
func TestBlockGridBounded(t *testing.T) {
	block, patch := [3]int{64, 64, 64}, [3]int{48, 64, 80}
	var bytes []int64
	// Up to an OpenOrganelle s0 (1.2·10^11 voxels) and 2^36: past 2^31.
	for _, shape := range [][3]int{{200, 300, 250}, {1000, 1000, 1000}, {12000, 1600, 6368}, {4096, 4096, 4096}} {
		g, err := NewBlockGrid(shape, block, patch, 0.5)
		if err != nil {
			t.Fatal(err)
		}
		r := g.MaxRegion()
		for a := range 3 {
			if r[a] > block[a]+2*(patch[a]-1) || r[a] < block[a] {
				t.Errorf("shape %v: region %v, want %v ≤ region ≤ block + 2·(patch−1)", shape, r, block)
			}
		}
		// Spot-check blocks against MaxRegion.
		for _, i := range []int{0, g.NumBlocks() / 2, g.NumBlocks() - 1} {
			w := g.Windows(g.Box(i))
			s := w.Region.Size()
			for a := range 3 {
				if s[a] > r[a] {
					t.Errorf("block %d region %v larger than MaxRegion %v", i, s, r)
				}
			}
			if !volume.Whole(shape).Contains(w.Read) || !w.Read.Contains(g.Box(i)) {
				t.Errorf("block %v reads %v", g.Box(i), w.Read)
			}
		}
		bytes = append(bytes, BlockBytes(g, 1, 3, 2))
	}
	// The bound with the largest possible region, whatever the volume.
	rn := int64((block[0] + 2*patch[0] - 2) * (block[1] + 2*patch[1] - 2) * (block[2] + 2*patch[2] - 2))
	pv := int64(patch[0] * patch[1] * patch[2])
	limit := 4 * (rn*(2+3+1) + 64*64*64*3 + 2*pv*(1+6) + pv)
	for i, b := range bytes {
		if b > limit || b <= 0 {
			t.Errorf("volume %d: BlockBytes %d, want ≤ %d (block and halo alone)", i, b, limit)
		}
	}
	if _, err := NewBlockGrid([3]int{10, 10, 10}, [3]int{0, 4, 4}, patch, 0.5); err == nil {
		t.Error("a zero block: no error")
	}
}

// TestPredictBlockHugeVolume: a volume of 2^36 voxels is planned in
// blocks, and its far corner block, read through a reader that makes the
// voxels up from their coordinates, equals Predict on the 32³ corner
// sub-volume, whose windows are the huge grid's there (both grids step
// by 4 from multiples of 4); the block reads only near the corner.
func TestPredictBlockHugeVolume(t *testing.T) {
	shape, block, patch := [3]int{4096, 4096, 4096}, [3]int{16, 16, 16}, [3]int{8, 8, 8}
	value := func(c, z, y, x int) float32 { return float32((z*5+y*3+x*7+c*11)%17) * 0.125 }
	g, err := NewBlockGrid(shape, block, patch, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	if g.NumBlocks() != 256*256*256 {
		t.Fatalf("%d blocks, want 256³", g.NumBlocks())
	}
	b := g.Box(g.NumBlocks() - 1)
	if b != (volume.Box{Lo: [3]int{4080, 4080, 4080}, Hi: shape}) {
		t.Fatalf("last block %v", b)
	}
	corner := [3]int{4064, 4064, 4064}
	read := func(box volume.Box, dst [][]float32) error {
		if !volume.Whole(shape).Contains(box) || box.Lo[0] < corner[0] || box.Lo[1] < corner[1] || box.Lo[2] < corner[2] {
			return fmt.Errorf("read %v, want a box inside the corner from %v", box, corner)
		}
		s := box.Size()
		for c := range dst {
			for z := range s[0] {
				for y := range s[1] {
					for x := range s[2] {
						dst[c][(z*s[1]+y)*s[2]+x] = value(c, box.Lo[0]+z, box.Lo[1]+y, box.Lo[2]+x)
					}
				}
			}
		}
		return nil
	}
	net := patchMix{inC: 2, outC: 3, p: patch}
	cfg := Window{Patch: patch, Overlap: 0.5, BatchSize: 2}
	got, err := PredictBlock(context.Background(), net, g, b, 2, 3, cfg, read)
	if err != nil {
		t.Fatal(err)
	}
	sub := [3]int{32, 32, 32}
	img := [][]float32{make([]float32, 32*32*32), make([]float32, 32*32*32)}
	if err := read(volume.Box{Lo: corner, Hi: shape}, img); err != nil {
		t.Fatal(err)
	}
	want, err := Predict(context.Background(), net, img, sub, 3, cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := 32 * 32 * 32
	for c := range 3 {
		for z := range 16 {
			for y := range 16 {
				for x := range 16 {
					v := ((16+z)*32+16+y)*32 + 16 + x
					if g, w := got[((c*16+z)*16+y)*16+x], want[c*n+v]; g != w {
						t.Fatalf("channel %d voxel (%d, %d, %d): %v, the corner's Predict %v", c, 4080+z, 4080+y, 4080+x, g, w)
					}
				}
			}
		}
	}
}
