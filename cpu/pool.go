package cpu

import (
	"fmt"

	"github.com/voxtrain/voxtrain/nn"
)

// poolDims checks a pooling's tensors: x (N, D, H, W, C) and its pooled
// counterpart y (N, D/kD, H/kH, W/kW, C), every window at least one voxel
// and no larger than its axis.
func poolDims(op string, x, y nn.Tensor, k [3]int) (n, d, h, w, c int) {
	n, d, h, w, c = dims5(op, x)
	for a, s := range [3]int{d, h, w} {
		if k[a] < 1 || k[a] > s {
			panic(fmt.Sprintf("cpu.%s: window %v does not fit the spatial size (%d, %d, %d)", op, k, d, h, w))
		}
	}
	mustShape(op, y, nn.Shape{n, d / k[0], h / k[1], w / k[2], c})
	return n, d, h, w, c
}

// AvgPool writes y = the mean of each k-window of x (see nn.Device). The
// window's sum runs in float32 in (kD, kH, kW) order, then is divided by
// its size: the CUDA kernel avg_pool's order, so the two agree bit for
// bit.
func (d *Device) AvgPool(x, y nn.Tensor, k [3]int) {
	const op = "AvgPool"
	n, D, H, W, c := poolDims(op, x, y, k)
	xs, ys := cpuTensor(x).data, cpuTensor(y).data
	oD, oH, oW := D/k[0], H/k[1], W/k[2]
	count := float32(k[0] * k[1] * k[2])
	d.parallel(n*oD, func(i int) {
		b, oz := i/oD, i%oD
		sum := make([]float32, c)
		for oy := 0; oy < oH; oy++ {
			for ox := 0; ox < oW; ox++ {
				clear(sum)
				for a := 0; a < k[0]; a++ {
					for e := 0; e < k[1]; e++ {
						row := ((b*D+oz*k[0]+a)*H+oy*k[1]+e)*W + ox*k[2]
						for f := 0; f < k[2]; f++ {
							src := xs[(row+f)*c : (row+f+1)*c]
							for j, v := range src {
								sum[j] += v
							}
						}
					}
				}
				dst := ys[(((b*oD+oz)*oH+oy)*oW+ox)*c:][:c]
				for j, s := range sum {
					dst[j] = s / count
				}
			}
		}
	})
}

// AvgPoolBackward writes dx = AvgPool's input gradient (see nn.Device):
// dy / window size, as the CUDA kernel avg_pool_backward.
func (d *Device) AvgPoolBackward(dy, dx nn.Tensor, k [3]int) {
	const op = "AvgPoolBackward"
	n, D, H, W, c := poolDims(op, dx, dy, k)
	gs, xs := cpuTensor(dy).data, cpuTensor(dx).data
	oD, oH, oW := D/k[0], H/k[1], W/k[2]
	count := float32(k[0] * k[1] * k[2])
	d.parallel(n*D, func(i int) {
		b, z := i/D, i%D
		for y := 0; y < H; y++ {
			dst := xs[((b*D+z)*H+y)*W*c:][:W*c]
			oz, oy := z/k[0], y/k[1]
			if oz >= oD || oy >= oH {
				clear(dst)
				continue
			}
			for x := 0; x < W; x++ {
				out := dst[x*c : (x+1)*c]
				ox := x / k[2]
				if ox >= oW {
					clear(out)
					continue
				}
				src := gs[(((b*oD+oz)*oH+oy)*oW+ox)*c:][:c]
				for j, g := range src {
					out[j] = g / count
				}
			}
		}
	})
}
