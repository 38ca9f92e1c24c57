package kernels

import "testing"

// recorder is a Launcher that records launches; buffers are byte offsets.
type recorder struct {
	grids  []Dim3
	chunks []int32 // the chunk argument of the per-chunk partial kernels
}

func (r *recorder) Launch(k Kernel, grid Dim3, args ...any) error {
	if k.Name == "instnorm_fwd_partial" {
		r.grids = append(r.grids, grid)
		r.chunks = append(r.chunks, args[len(args)-1].(int32))
	}
	return nil
}

func (r *recorder) Offset(b int, bytes int) int { return b + bytes }

// TestDefaultChunk checks that the default chunk of per-sample reductions
// gives the deep U-Net levels enough blocks (nnU-Net 3d_fullres at 128³:
// 128³ … 4³ voxels), keeps DefaultChunk for the large ones, that the
// kernel gets the chunk the grid was cut by, and that a set Chunk wins.
func TestDefaultChunk(t *testing.T) {
	for _, c := range []struct {
		v, chunk, chunks int
	}{
		{128 * 128 * 128, 4096, 512},
		{64 * 64 * 64, 2048, 128},
		{32 * 32 * 32, 256, 128},
		{16 * 16 * 16, 32, 128},
		{8 * 8 * 8, 32, 16},
		{4 * 4 * 4, 32, 2},
		{1, 32, 1},
		{5000, 32, 157},
	} {
		r := &recorder{}
		o := Ops[int]{Launcher: r}
		if err := o.InstanceNormActForward(0, 0, 0, 0, 0, 0, 2, c.v, 256, 1e-5, 0.01); err != nil {
			t.Fatal(err)
		}
		g := r.grids[0]
		if int(r.chunks[0]) != c.chunk || g.X != c.chunks || g.Y != 2 {
			t.Errorf("v=%d: chunk %d, grid %d×%d; want chunk %d, grid %d×2", c.v, r.chunks[0], g.X, g.Y, c.chunk, c.chunks)
		}
		if int(r.chunks[0])*(g.X-1) >= c.v || int(r.chunks[0])*g.X < c.v {
			t.Errorf("v=%d: %d chunks of %d do not cover the voxels once", c.v, g.X, r.chunks[0])
		}
		if want := 8 * (2*g.X*(3*256+1) + 4*2*256); o.ScratchBytes(2, c.v, 256) != want {
			t.Errorf("v=%d: ScratchBytes %d, want %d for %d chunks", c.v, o.ScratchBytes(2, c.v, 256), want, g.X)
		}
	}
	r := &recorder{}
	o := Ops[int]{Launcher: r, Chunk: 37}
	if err := o.InstanceNormActForward(0, 0, 0, 0, 0, 0, 1, 4096, 8, 1e-5, 0.01); err != nil {
		t.Fatal(err)
	}
	if r.chunks[0] != 37 || r.grids[0].X != 111 {
		t.Errorf("Chunk 37 over 4096 voxels: chunk %d, %d chunks; want 37, 111", r.chunks[0], r.grids[0].X)
	}
}
