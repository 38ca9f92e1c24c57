package cpu

import (
	"fmt"

	"github.com/voxtrain/voxtrain/nn"
)

// elemBlock is the smallest block of elements worth a goroutine.
const elemBlock = 1 << 15

// Fill sets every element of t to v.
func (d *Device) Fill(t nn.Tensor, v float32) {
	x := cpuTensor(t).data
	d.parallelRange(len(x), elemBlock, func(lo, hi int) {
		s := x[lo:hi]
		for i := range s {
			s[i] = v
		}
	})
}

// Copy copies src into dst.
func (d *Device) Copy(dst, src nn.Tensor) {
	s := cpuTensor(src).data
	t := mustLen("Copy", dst, len(s))
	d.parallelRange(len(s), elemBlock, func(lo, hi int) { copy(t[lo:hi], s[lo:hi]) })
}

// Add computes dst += src.
func (d *Device) Add(dst, src nn.Tensor) {
	s := cpuTensor(src).data
	t := mustLen("Add", dst, len(s))
	d.parallelRange(len(s), elemBlock, func(lo, hi int) {
		a, b := t[lo:hi], s[lo:hi]
		for i := range a {
			a[i] += b[i]
		}
	})
}

// Scale computes t *= alpha.
func (d *Device) Scale(t nn.Tensor, alpha float32) {
	x := cpuTensor(t).data
	d.parallelRange(len(x), elemBlock, func(lo, hi int) {
		s := x[lo:hi]
		for i := range s {
			s[i] *= alpha
		}
	})
}

// dims5 returns the dimensions of a 5-D tensor, panicking otherwise.
func dims5(op string, t nn.Tensor) (n, a, b, c, e int) {
	s := cpuTensor(t).shape
	if len(s) != 5 {
		panic(fmt.Sprintf("cpu.%s: want a 5-D tensor, have shape %v", op, s))
	}
	return s[0], s[1], s[2], s[3], s[4]
}

// NCDHWToNDHWC converts channels-first src to channels-last dst.
func (d *Device) NCDHWToNDHWC(src, dst nn.Tensor) {
	n, c, dd, h, w := dims5("NCDHWToNDHWC", src)
	s := cpuTensor(src).data
	t := mustShape("NCDHWToNDHWC", dst, nn.Shape{n, dd, h, w, c})
	v := dd * h * w
	d.parallel(n*c, func(i int) {
		b, ch := i/c, i%c
		in := s[i*v : (i+1)*v]
		out := t[b*v*c:]
		for j, x := range in {
			out[j*c+ch] = x
		}
	})
}

// NDHWCToNCDHW converts channels-last src to channels-first dst.
func (d *Device) NDHWCToNCDHW(src, dst nn.Tensor) {
	n, dd, h, w, c := dims5("NDHWCToNCDHW", src)
	s := cpuTensor(src).data
	t := mustShape("NDHWCToNCDHW", dst, nn.Shape{n, c, dd, h, w})
	v := dd * h * w
	d.parallel(n*c, func(i int) {
		b, ch := i/c, i%c
		out := t[i*v : (i+1)*v]
		in := s[b*v*c:]
		for j := range out {
			out[j] = in[j*c+ch]
		}
	})
}

// ConcatChannels writes dst = concat(a, b) along the channel axis.
func (d *Device) ConcatChannels(a, b, dst nn.Tensor) {
	n, dd, h, w, ca := dims5("ConcatChannels", a)
	cb := cpuTensor(b).shape[4]
	as := cpuTensor(a).data
	bs := mustShape("ConcatChannels", b, nn.Shape{n, dd, h, w, cb})
	ds := mustShape("ConcatChannels", dst, nn.Shape{n, dd, h, w, ca + cb})
	c := ca + cb
	d.parallelRange(n*dd*h*w, elemBlock/c+1, func(lo, hi int) {
		for v := lo; v < hi; v++ {
			copy(ds[v*c:v*c+ca], as[v*ca:(v+1)*ca])
			copy(ds[v*c+ca:(v+1)*c], bs[v*cb:(v+1)*cb])
		}
	})
}

// SplitChannels writes the first channels of src to a and the rest to b.
func (d *Device) SplitChannels(src, a, b nn.Tensor) {
	n, dd, h, w, c := dims5("SplitChannels", src)
	ca := cpuTensor(a).shape[len(cpuTensor(a).shape)-1]
	cb := c - ca
	ss := cpuTensor(src).data
	as := mustShape("SplitChannels", a, nn.Shape{n, dd, h, w, ca})
	bs := mustShape("SplitChannels", b, nn.Shape{n, dd, h, w, cb})
	d.parallelRange(n*dd*h*w, elemBlock/c+1, func(lo, hi int) {
		for v := lo; v < hi; v++ {
			copy(as[v*ca:(v+1)*ca], ss[v*c:v*c+ca])
			copy(bs[v*cb:(v+1)*cb], ss[v*c+ca:(v+1)*c])
		}
	})
}

// AddChannelBias adds bias[c] to channel c of t.
func (d *Device) AddChannelBias(t, bias nn.Tensor) {
	s := cpuTensor(t).shape
	c := s[len(s)-1]
	x := cpuTensor(t).data
	bs := mustLen("AddChannelBias", bias, c)
	rows := len(x) / c
	d.parallelRange(rows, elemBlock/c+1, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row := x[r*c : (r+1)*c]
			for i := range row {
				row[i] += bs[i]
			}
		}
	})
}

// ChannelSum writes dst[c] = Σ of channel c of t over all other axes.
func (d *Device) ChannelSum(t, dst nn.Tensor) {
	s := cpuTensor(t).shape
	c := s[len(s)-1]
	x := cpuTensor(t).data
	out := mustLen("ChannelSum", dst, c)
	rows := len(x) / c
	nch := chunks(rows)
	part := make([]float64, nch*c)
	d.parallel(nch, func(k int) {
		p := part[k*c : (k+1)*c]
		for r := k * chunkVoxels; r < min(rows, (k+1)*chunkVoxels); r++ {
			row := x[r*c : (r+1)*c]
			for i, v := range row {
				p[i] += float64(v)
			}
		}
	})
	for i := range out {
		var sum float64
		for k := 0; k < nch; k++ {
			sum += part[k*c+i]
		}
		out[i] = float32(sum)
	}
}

// nearestExact returns PyTorch's "nearest-exact" source index for output
// index o when resizing in → out.
func nearestExact(o, in, out int) int {
	i := int((float64(o) + 0.5) * float64(in) / float64(out))
	return min(i, in-1)
}

// DownsampleLabels resamples labels (N, D, H, W) to dst's size.
func (d *Device) DownsampleLabels(src, dst nn.Tensor) {
	ss, ds := cpuTensor(src).shape, cpuTensor(dst).shape
	if len(ss) != 4 || len(ds) != 4 || ss[0] != ds[0] {
		panic(fmt.Sprintf("cpu.DownsampleLabels: shapes %v -> %v", ss, ds))
	}
	x, y := cpuTensor(src).data, cpuTensor(dst).data
	n, D, H, W := ss[0], ss[1], ss[2], ss[3]
	oD, oH, oW := ds[1], ds[2], ds[3]
	d.parallel(n*oD, func(i int) {
		b, od := i/oD, i%oD
		id := nearestExact(od, D, oD)
		for oh := 0; oh < oH; oh++ {
			ih := nearestExact(oh, H, oH)
			src := x[((b*D+id)*H+ih)*W:]
			dst := y[((b*oD+od)*oH+oh)*oW:]
			for ow := 0; ow < oW; ow++ {
				dst[ow] = src[nearestExact(ow, W, oW)]
			}
		}
	})
}
