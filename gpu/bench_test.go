//go:build cuda

package gpu_test

import (
	"fmt"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/gpu"
	"github.com/voxtrain/voxtrain/gpu/internal/devcheck"
	"github.com/voxtrain/voxtrain/nn"
)

// BenchmarkH2D measures host-to-device bandwidth of 64 MiB uploads on a
// copy stream from pageable Go memory, pinned memory and write-combined
// pinned memory. Go's MB/s column is wall time per upload including the
// host's wait; the gpu-GB/s metric is the copy alone on the GPU's clock.
func BenchmarkH2D(b *testing.B) {
	const n = 16 << 20 // floats: 64 MiB
	for _, kind := range []string{"pageable", "pinned", "pinned-writecombined"} {
		b.Run(kind, func(b *testing.B) {
			var src []float32
			switch kind {
			case "pageable":
				src = make([]float32, n)
			default:
				a := dev.PinnedAllocator(kind == "pinned-writecombined")
				var err error
				if src, err = a.Alloc(n); err != nil {
					b.Fatal(err)
				}
				defer a.Free(src)
			}
			for i := range src {
				src[i] = float32(i)
			}
			x := dev.Alloc(nn.Shape{n})
			defer dev.Free(x)
			cs, err := dev.NewCopyStream()
			if err != nil {
				b.Fatal(err)
			}
			cs.Wait(dev.ComputeStream().Record()) // after x's zero fill
			b.SetBytes(4 * n)
			b.ResetTimer()
			start := cs.RecordTimed()
			for i := 0; i < b.N; i++ {
				if err := dev.Upload(cs, x, src); err != nil {
					b.Fatal(err)
				}
				cs.Synchronize()
			}
			end := cs.RecordTimed()
			end.Synchronize()
			b.StopTimer()
			if d, err := dev.Elapsed(start, end); err == nil && d > 0 {
				b.ReportMetric(float64(b.N)*4*n/d.Seconds()/1e9, "gpu-GB/s")
			}
			if err := dev.Err(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// stepConfigs are the step-time benchmarks: the reference U-Net of
// bench/torch_unet_step.py at its two sizes, and nnU-Net's 3d_fullres
// network at its usual 128³ patch.
var stepConfigs = []struct {
	name  string
	cfg   config.Model
	batch int
	patch [3]int
}{
	{"ref-2x64", config.Default().Model, 2, [3]int{64, 64, 64}},
	{"ref-1x96", config.Default().Model, 1, [3]int{96, 96, 96}},
	{"nnunet-2x128", devcheck.Model([]int{32, 64, 128, 256, 320, 320}, 2, true), 2, [3]int{128, 128, 128}},
}

// BenchmarkUNetStep times training steps (forward, loss, backward, SGD)
// with nn.BenchStep in each precision (fp32, TF32, bf16) and with each
// convolution (own: vol2col and cuBLAS; cudnn), each on a device of its
// own: ms per step (median), GFLOP/s (3 × forward convolution FLOPs),
// peak device memory of tensors and of everything (PyTorch's
// max_memory_allocated counts the latter). The first warm-up step times
// cuDNN's algorithms (or reads them from the disk cache).
func BenchmarkUNetStep(b *testing.B) {
	for _, cv := range []gpu.Conv{gpu.ConvOwn, gpu.ConvCuDNN} {
		for _, m := range []gpu.Math{gpu.MathFP32, gpu.MathTF32, gpu.MathBF16} {
			for _, sc := range stepConfigs {
				b.Run(fmt.Sprintf("%s/%s/%s", sc.name, m, cv), func(b *testing.B) {
					d, err := gpu.New(gpu.Options{Ordinal: *ordinal, Math: m, Conv: cv})
					if err != nil {
						b.Fatal(err)
					}
					defer func() {
						if err := d.Close(); err != nil {
							b.Error(err)
						}
					}()
					r, err := nn.BenchStep(d, sc.cfg, nn.BenchOptions{Batch: sc.batch, Patch: sc.patch, Steps: max(b.N, 3), Warmup: 2, Seed: 1})
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(float64(r.Median.Microseconds())/1e3, "ms/step")
					b.ReportMetric(float64(r.MedianFwd.Microseconds())/1e3, "ms/fwd")
					b.ReportMetric(r.GFLOPS, "GFLOP/s")
					b.ReportMetric(float64(r.PeakDevice)/(1<<20), "peak-MiB")
					b.ReportMetric(float64(r.PeakAllocated)/(1<<20), "peak-all-MiB")
					b.Logf("%s on %s: %d parameters, median %.1f ms/step (min %.1f, max %.1f), forward+loss %.1f ms, %.0f GFLOP/s, peak %.0f MiB in tensors, %.0f MiB with buffers and workspaces, loss %.4f -> %.4f",
						sc.name, d.Name(), r.Params, ms(r.Median), ms(r.Min), ms(r.Max), ms(r.MedianFwd), r.GFLOPS,
						float64(r.PeakDevice)/(1<<20), float64(r.PeakAllocated)/(1<<20), r.LossFirst, r.LossLast)
					for _, n := range d.DNNNotes() {
						b.Logf("cuDNN note: %s", n)
					}
				})
			}
		}
	}
}
