package kern

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/voxtrain/voxtrain/internal/geom"
	"github.com/voxtrain/voxtrain/internal/procstat"
)

// unetLayer is one convolution of the reference U-Net
// (/work/shared/bench/torch_unet_step.py) as the kernels see it. For a
// ConvTranspose3d(2, 2) layer, g is the stride-2 convolution whose
// backward-data is the transposed convolution: its forward pass runs
// Conv3DBackwardData(g), its input gradient Conv3DForward(g), its weight
// gradient Conv3DBackwardWeight(g) with the roles of x and dy swapped.
type unetLayer struct {
	name  string
	g     geom.Conv
	up    bool // a transposed convolution
	first bool // the input layer: no input gradient in a training step
}

// unetLayers lists the convolutions of one U-Net training step at batch n,
// cube side s (features 16-32-64-128, in 1, out 2).
func unetLayers(n, s int) []unetLayer {
	c3 := func(side, ci, co, st int) geom.Conv {
		return geom.Conv{N: n, InD: side, InH: side, InW: side, InC: ci, OutC: co, KD: 3, KH: 3, KW: 3, SD: st, SH: st, SW: st, PD: 1, PH: 1, PW: 1}
	}
	up := func(outSide, ci, co int) geom.Conv {
		return geom.Conv{N: n, InD: outSide, InH: outSide, InW: outSide, InC: ci, OutC: co, KD: 2, KH: 2, KW: 2, SD: 2, SH: 2, SW: 2}
	}
	return []unetLayer{
		{name: "enc1a", g: c3(s, 1, 16, 1), first: true},
		{name: "enc1b", g: c3(s, 16, 16, 1)},
		{name: "enc2a", g: c3(s, 16, 32, 2)},
		{name: "enc2b", g: c3(s/2, 32, 32, 1)},
		{name: "enc3a", g: c3(s/2, 32, 64, 2)},
		{name: "enc3b", g: c3(s/4, 64, 64, 1)},
		{name: "enc4a", g: c3(s/4, 64, 128, 2)},
		{name: "enc4b", g: c3(s/8, 128, 128, 1)},
		{name: "up3", g: up(s/4, 64, 128), up: true},
		{name: "dec3a", g: c3(s/4, 128, 64, 1)},
		{name: "dec3b", g: c3(s/4, 64, 64, 1)},
		{name: "up2", g: up(s/2, 32, 64), up: true},
		{name: "dec2a", g: c3(s/2, 64, 32, 1)},
		{name: "dec2b", g: c3(s/2, 32, 32, 1)},
		{name: "up1", g: up(s, 16, 32), up: true},
		{name: "dec1a", g: c3(s, 32, 16, 1)},
		{name: "dec1b", g: c3(s, 16, 16, 1)},
		{name: "head", g: geom.Conv{N: n, InD: s, InH: s, InW: s, InC: 16, OutC: 2, KD: 1, KH: 1, KW: 1, SD: 1, SH: 1, SW: 1}},
	}
}

// flops is 2 × multiply-adds of one pass (the same for all three ops).
func flops(g geom.Conv) float64 { return 2 * float64(g.MACs()) }

type layerBufs struct{ x, w, b, y, dx, dw, db []float32 }

func newLayerBufs(g geom.Conv) *layerBufs {
	r := rand.New(rand.NewPCG(1, 1))
	return &layerBufs{
		x: randSlice(r, g.InLen()), w: randSlice(r, g.WeightLen()), b: randSlice(r, g.OutC),
		y: randSlice(r, g.OutLen()), dx: make([]float32, g.InLen()),
		dw: make([]float32, g.WeightLen()), db: make([]float32, g.OutC),
	}
}

// reportRates reports GFLOP/s over wall time and, where CPU time is known,
// GFLOP per CPU-second ("GFLOP/cpu-s": the per-core rate, less disturbed by
// other processes on a shared machine).
func reportRates(b *testing.B, flops, cpu float64) {
	b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	if cpu > 0 {
		b.ReportMetric(flops/cpu/1e9, "GFLOP/cpu-s")
	}
}

// The ops of a training step, named by what the U-Net layer does: for an
// up layer "fwd" is its transposed convolution (Conv3DBackwardData of g).
var stepOps = []string{"fwd", "bwd_data", "bwd_weight"}

func runOp(e *Engine, l unetLayer, bu *layerBufs, op string) {
	g := l.g
	switch {
	case op == "fwd" && !l.up, op == "bwd_data" && l.up:
		e.Conv3DForward(g, bu.x, bu.w, bu.b, bu.y)
	case op == "bwd_data" && !l.up, op == "fwd" && l.up:
		e.Conv3DBackwardData(g, bu.y, bu.w, bu.dx)
	case op == "bwd_weight":
		e.Conv3DBackwardWeight(g, bu.x, bu.y, bu.dw, bu.db)
	}
}

// BenchmarkUNet times each convolution op of the reference U-Net's training
// step, at the two sizes of torch_unet_step.py (2×64³ and 1×96³):
//
//	go test -run '^$' -bench '^BenchmarkUNet$' ./cpu/kern
//
// cpu/kern/testdata/torch_conv_bench.py runs the same ops in PyTorch.
func BenchmarkUNet(b *testing.B) {
	for _, cfg := range [][2]int{{2, 64}, {1, 96}} {
		for _, l := range unetLayers(cfg[0], cfg[1]) {
			var bu *layerBufs // made on first use, so a -bench filter skips the set-up
			for _, op := range stepOps {
				if op == "bwd_data" && l.first {
					continue
				}
				b.Run(fmt.Sprintf("b%ds%d/%s/%s", cfg[0], cfg[1], l.name, op), func(b *testing.B) {
					if bu == nil {
						bu = newLayerBufs(l.g)
					}
					var e Engine
					runOp(&e, l, bu, op) // warm the scratch pool
					b.ResetTimer()
					c0 := procstat.CPUTime()
					for i := 0; i < b.N; i++ {
						runOp(&e, l, bu, op)
					}
					reportRates(b, flops(l.g)*float64(b.N), (procstat.CPUTime() - c0).Seconds())
				})
			}
		}
	}
}

// BenchmarkUNetStep runs every convolution op of one training step (the
// forward and backward of all 18 layers, no input gradient for the first).
func BenchmarkUNetStep(b *testing.B) {
	for _, cfg := range [][2]int{{2, 64}, {1, 96}} {
		ls := unetLayers(cfg[0], cfg[1])
		b.Run(fmt.Sprintf("b%ds%d", cfg[0], cfg[1]), func(b *testing.B) {
			bus := make([]*layerBufs, len(ls))
			var fl float64
			for i, l := range ls {
				bus[i] = newLayerBufs(l.g)
				fl += 3 * flops(l.g)
			}
			var e Engine
			step := func() {
				for i, l := range ls {
					for _, op := range stepOps {
						if op != "bwd_data" || !l.first {
							runOp(&e, l, bus[i], op)
						}
					}
				}
			}
			step()
			b.ResetTimer()
			c0 := procstat.CPUTime()
			for i := 0; i < b.N; i++ {
				step()
			}
			reportRates(b, fl*float64(b.N), (procstat.CPUTime() - c0).Seconds())
		})
	}
}

// BenchmarkSgemm: square products and the U-Net's tall-skinny shape.
func BenchmarkSgemm(b *testing.B) {
	for _, s := range [][3]int{{256, 256, 256}, {1024, 1024, 1024}, {32768, 16, 432}} {
		m, n, k := s[0], s[1], s[2]
		r := rand.New(rand.NewPCG(2, 2))
		a, bb, c := randSlice(r, m*k), randSlice(r, k*n), make([]float32, m*n)
		b.Run(fmt.Sprintf("%dx%dx%d", m, n, k), func(b *testing.B) {
			var e Engine
			e.Sgemm(false, false, m, n, k, 1, a, k, bb, n, 0, c, n)
			b.ResetTimer()
			c0 := procstat.CPUTime()
			for i := 0; i < b.N; i++ {
				e.Sgemm(false, false, m, n, k, 1, a, k, bb, n, 0, c, n)
			}
			reportRates(b, 2*float64(m*n*k)*float64(b.N), (procstat.CPUTime() - c0).Seconds())
		})
	}
}

// BenchmarkNNUNet times layers of nnU-Net's 3d_fullres U-Net (features
// 32-64-128-256-320-320, 128³ patches, batch 2): the wide, small-volume layers
// at the bottom and the 1-channel input layer. The large top layers are
// BenchmarkUNet's shapes with more channels.
func BenchmarkNNUNet(b *testing.B) {
	c3 := func(n, side, ci, co, st int) geom.Conv {
		return geom.Conv{N: n, InD: side, InH: side, InW: side, InC: ci, OutC: co, KD: 3, KH: 3, KW: 3, SD: st, SH: st, SW: st, PD: 1, PH: 1, PW: 1}
	}
	layers := []unetLayer{
		{name: "in1x128c32", g: c3(2, 128, 1, 32, 1), first: true},
		{name: "s128c32", g: c3(1, 128, 32, 32, 1)},
		{name: "s128c64to32", g: c3(1, 128, 64, 32, 1)},
		{name: "s16c256to320s2", g: c3(2, 16, 256, 320, 2)},
		{name: "s8c320", g: c3(2, 8, 320, 320, 1)},
		{name: "s8c320to320s2", g: c3(2, 8, 320, 320, 2)},
		{name: "s4c320", g: c3(2, 4, 320, 320, 1)},
		{name: "up4to8c320", g: geom.Conv{N: 2, InD: 8, InH: 8, InW: 8, InC: 320, OutC: 320, KD: 2, KH: 2, KW: 2, SD: 2, SH: 2, SW: 2}, up: true},
		{name: "s8c640to320", g: c3(2, 8, 640, 320, 1)},
	}
	for _, l := range layers {
		var bu *layerBufs
		for _, op := range stepOps {
			if op == "bwd_data" && l.first {
				continue
			}
			b.Run(l.name+"/"+op, func(b *testing.B) {
				if bu == nil {
					bu = newLayerBufs(l.g)
				}
				var e Engine
				runOp(&e, l, bu, op)
				b.ResetTimer()
				c0 := procstat.CPUTime()
				for i := 0; i < b.N; i++ {
					runOp(&e, l, bu, op)
				}
				reportRates(b, flops(l.g)*float64(b.N), (procstat.CPUTime() - c0).Seconds())
			})
		}
	}
}
