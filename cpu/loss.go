package cpu

import (
	"fmt"
	"math"

	"github.com/voxtrain/voxtrain/nn"
)

// labelDims checks a channels-last tensor t (N, D, H, W, C) against labels
// (N, D, H, W) and returns (N, voxels per sample, C).
func labelDims(op string, t, labels nn.Tensor) (n, v, c int) {
	n, dd, h, w, c := dims5(op, t)
	mustShape(op, labels, nn.Shape{n, dd, h, w})
	return n, dd * h * w, c
}

// badLabel records the first invalid label seen by a chunk.
type badLabel struct {
	found bool
	value float32
	index int
}

// classOf returns the class index of label value l, or -1 if l is not an
// integer in [0, c).
func classOf(l float32, c int) int {
	k := int(l)
	if float32(k) != l || k < 0 || k >= c {
		return -1
	}
	return k
}

// firstBad returns an error for the first invalid label over chunks, in order.
func firstBad(op string, bads []badLabel, c int) error {
	for _, b := range bads {
		if b.found {
			return fmt.Errorf("%s: label %v at flat voxel %d is not a class index in [0, %d)", op, b.value, b.index, c)
		}
	}
	return nil
}

// Softmax writes probs = softmax(logits) over the last axis.
func (d *Device) Softmax(logits, probs nn.Tensor) {
	s := cpuTensor(logits).shape
	c := s[len(s)-1]
	zs := cpuTensor(logits).data
	ps := mustLen("Softmax", probs, len(zs))
	d.parallelRange(len(zs)/c, elemBlock/c+1, func(lo, hi int) {
		e := make([]float64, c)
		for vox := lo; vox < hi; vox++ {
			softmaxRow(zs[vox*c:(vox+1)*c], ps[vox*c:(vox+1)*c], e)
		}
	})
}

// softmaxRow writes p = softmax(z) using scratch e and returns the row's
// maximum and Σ exp(z − max) (for the log-sum-exp).
func softmaxRow(z, p []float32, e []float64) (m float32, s float64) {
	m = z[0]
	for _, val := range z[1:] {
		m = max(m, val)
	}
	for j, val := range z {
		e[j] = math.Exp(float64(val - m))
		s += e[j]
	}
	for j := range z {
		p[j] = float32(e[j] / s)
	}
	return m, s
}

// SoftmaxLoss computes probs = softmax(logits) and the SegStats sums.
func (d *Device) SoftmaxLoss(logits, labels, probs nn.Tensor) (nn.SegStats, error) {
	return d.softmaxLoss("SoftmaxLoss", logits, labels, probs, -1)
}

// SoftmaxLossIgnore is SoftmaxLoss leaving the voxels labelled ignore out
// of every sum (nn.IgnoreLossDevice); their probabilities are still
// written.
func (d *Device) SoftmaxLossIgnore(logits, labels, probs nn.Tensor, ignore int) (nn.SegStats, error) {
	return d.softmaxLoss("SoftmaxLossIgnore", logits, labels, probs, ignore)
}

// isIgnored reports whether label l is the ignore label (ignore ≥ 0).
func isIgnored(l float32, ignore int) bool { return ignore >= 0 && l == float32(ignore) }

func (d *Device) softmaxLoss(op string, logits, labels, probs nn.Tensor, ignore int) (nn.SegStats, error) {
	n, v, c := labelDims(op, logits, labels)
	zs := cpuTensor(logits).data
	ls := cpuTensor(labels).data
	ps := mustLen(op, probs, len(zs))
	nch := chunks(v)
	// per chunk: ce, counted voxels, then intersect[c], psum[c], tsum[c]
	w := 2 + 3*c
	part := make([]float64, n*nch*w)
	bads := make([]badLabel, n*nch)
	d.parallel(n*nch, func(i int) {
		b, k := i/nch, i%nch
		p := part[i*w : (i+1)*w]
		inter, psum, tsum := p[2:2+c], p[2+c:2+2*c], p[2+2*c:]
		e := make([]float64, c)
		for vox := b*v + k*chunkVoxels; vox < b*v+min(v, (k+1)*chunkVoxels); vox++ {
			z := zs[vox*c : (vox+1)*c]
			pr := ps[vox*c : (vox+1)*c]
			m, s := softmaxRow(z, pr, e)
			if isIgnored(ls[vox], ignore) {
				continue
			}
			p[1]++
			for j, q := range pr {
				psum[j] += float64(q)
			}
			l := classOf(ls[vox], c)
			if l < 0 {
				if !bads[i].found {
					bads[i] = badLabel{true, ls[vox], vox}
				}
				continue
			}
			p[0] += float64(m) + math.Log(s) - float64(z[l])
			inter[l] += float64(pr[l])
			tsum[l]++
		}
	})
	if err := firstBad(op, bads, c); err != nil {
		return nn.SegStats{}, err
	}
	st := nn.SegStats{N: n, C: c, Voxels: v,
		CE: make([]float64, n), Intersect: make([]float64, n*c),
		PredSum: make([]float64, n*c), TargetSum: make([]float64, n*c)}
	if ignore >= 0 {
		st.Counted = make([]float64, n)
	}
	for b := 0; b < n; b++ {
		for k := 0; k < nch; k++ {
			p := part[(b*nch+k)*w : (b*nch+k+1)*w]
			st.CE[b] += p[0]
			if st.Counted != nil {
				st.Counted[b] += p[1]
			}
			for j := 0; j < c; j++ {
				st.Intersect[b*c+j] += p[2+j]
				st.PredSum[b*c+j] += p[2+c+j]
				st.TargetSum[b*c+j] += p[2+2*c+j]
			}
		}
	}
	return st, nil
}

// SoftmaxLossBackward writes dlogits = J_softmaxᵀ·q + ceScale·(p − onehot)
// with q = alpha·onehot + beta + extra.
func (d *Device) SoftmaxLossBackward(probs, labels nn.Tensor, ceScale, alpha, beta []float32, extra, dlogits nn.Tensor) {
	d.softmaxLossBackward("SoftmaxLossBackward", probs, labels, ceScale, alpha, beta, extra, dlogits, -1)
}

// SoftmaxLossBackwardIgnore is SoftmaxLossBackward with dlogits zero at
// the voxels labelled ignore (nn.IgnoreLossDevice).
func (d *Device) SoftmaxLossBackwardIgnore(probs, labels nn.Tensor, ceScale, alpha, beta []float32, extra, dlogits nn.Tensor, ignore int) {
	d.softmaxLossBackward("SoftmaxLossBackwardIgnore", probs, labels, ceScale, alpha, beta, extra, dlogits, ignore)
}

func (d *Device) softmaxLossBackward(op string, probs, labels nn.Tensor, ceScale, alpha, beta []float32, extra, dlogits nn.Tensor, ignore int) {
	n, v, c := labelDims(op, probs, labels)
	ps := cpuTensor(probs).data
	ls := cpuTensor(labels).data
	ds := mustLen(op, dlogits, len(ps))
	var ex []float32
	if extra != nil {
		ex = mustLen(op, extra, len(ps))
	}
	if len(ceScale) != n || len(alpha) != n*c || len(beta) != n*c {
		panic(fmt.Sprintf("cpu.%s: coefficient lengths %d, %d, %d for N=%d C=%d", op, len(ceScale), len(alpha), len(beta), n, c))
	}
	nch := chunks(v)
	d.parallel(n*nch, func(i int) {
		b, k := i/nch, i%nch
		q := make([]float32, c)
		al, be, cs := alpha[b*c:(b+1)*c], beta[b*c:(b+1)*c], ceScale[b]
		for vox := b*v + k*chunkVoxels; vox < b*v+min(v, (k+1)*chunkVoxels); vox++ {
			p := ps[vox*c : (vox+1)*c]
			dz := ds[vox*c : (vox+1)*c]
			if isIgnored(ls[vox], ignore) {
				clear(dz)
				continue
			}
			l := classOf(ls[vox], c)
			copy(q, be)
			if l >= 0 {
				q[l] += al[l]
			}
			if ex != nil {
				for j, e := range ex[vox*c : (vox+1)*c] {
					q[j] += e
				}
			}
			var dot float32
			for j, pj := range p {
				dot += pj * q[j]
			}
			for j, pj := range p {
				dz[j] = pj*(q[j]-dot) + cs*pj
			}
			if l >= 0 {
				dz[l] -= cs
			}
		}
	})
}

// softplus returns log(1 + exp(x)) without overflow.
func softplus(x float64) float64 {
	return max(x, 0) + math.Log1p(math.Exp(-math.Abs(x)))
}

// SigmoidBCE computes per-sample sums of BCEWithLogits(pos_weight) and
// dlogits = gradScale·∂sum/∂z = gradScale·(σ(z)·(pw·y + 1 − y) − pw·y).
func (d *Device) SigmoidBCE(logits, labels nn.Tensor, posWeight, gradScale float32, dlogits nn.Tensor) ([]float64, error) {
	const op = "SigmoidBCE"
	n, v, c := labelDims(op, logits, labels)
	if c != 1 {
		panic(fmt.Sprintf("cpu.%s: logits have %d channels, want 1", op, c))
	}
	zs := cpuTensor(logits).data
	ls := cpuTensor(labels).data
	ds := mustLen(op, dlogits, len(zs))
	nch := chunks(v)
	part := make([]float64, n*nch)
	bads := make([]badLabel, n*nch)
	pw := float64(posWeight)
	d.parallel(n*nch, func(i int) {
		b, k := i/nch, i%nch
		for vox := b*v + k*chunkVoxels; vox < b*v+min(v, (k+1)*chunkVoxels); vox++ {
			y := classOf(ls[vox], 2)
			if y < 0 {
				if !bads[i].found {
					bads[i] = badLabel{true, ls[vox], vox}
				}
				ds[vox] = 0
				continue
			}
			z := float64(zs[vox])
			yf := float64(y)
			part[i] += pw*yf*softplus(-z) + (1-yf)*softplus(z)
			sig := 1 / (1 + math.Exp(-z))
			ds[vox] = gradScale * float32(sig*(pw*yf+1-yf)-pw*yf)
		}
	})
	if err := firstBad(op, bads, 2); err != nil {
		return nil, err
	}
	out := make([]float64, n)
	for b := 0; b < n; b++ {
		for k := 0; k < nch; k++ {
			out[b] += part[b*nch+k]
		}
	}
	return out, nil
}

// OneHot writes dst[n,v,c] = [labels[n,v] = c].
func (d *Device) OneHot(labels, dst nn.Tensor) error {
	const op = "OneHot"
	n, v, c := labelDims(op, dst, labels)
	ls := cpuTensor(labels).data
	ds := cpuTensor(dst).data
	nch := chunks(v)
	bads := make([]badLabel, n*nch)
	d.parallel(n*nch, func(i int) {
		b, k := i/nch, i%nch
		for vox := b*v + k*chunkVoxels; vox < b*v+min(v, (k+1)*chunkVoxels); vox++ {
			row := ds[vox*c : (vox+1)*c]
			clear(row)
			l := classOf(ls[vox], c)
			if l < 0 {
				if !bads[i].found {
					bads[i] = badLabel{true, ls[vox], vox}
				}
				continue
			}
			row[l] = 1
		}
	})
	return firstBad(op, bads, c)
}

// ChannelDot returns Σ_v a·b per (sample, channel); b may be nil.
func (d *Device) ChannelDot(a, b nn.Tensor) []float64 {
	const op = "ChannelDot"
	n, dd, h, w, c := dims5(op, a)
	as := cpuTensor(a).data
	var bs []float32
	if b != nil {
		bs = mustShape(op, b, cpuTensor(a).shape)
	}
	v := dd * h * w
	nch := chunks(v)
	part := make([]float64, n*nch*c)
	d.parallel(n*nch, func(i int) {
		bi, k := i/nch, i%nch
		p := part[i*c : (i+1)*c]
		lo, hi := (bi*v+k*chunkVoxels)*c, (bi*v+min(v, (k+1)*chunkVoxels))*c
		if bs == nil {
			for r := lo; r < hi; r += c {
				for j, x := range as[r : r+c] {
					p[j] += float64(x)
				}
			}
			return
		}
		for r := lo; r < hi; r += c {
			br := bs[r : r+c]
			for j, x := range as[r : r+c] {
				p[j] += float64(x) * float64(br[j])
			}
		}
	})
	out := make([]float64, n*c)
	for bi := 0; bi < n; bi++ {
		for k := 0; k < nch; k++ {
			for j := 0; j < c; j++ {
				out[bi*c+j] += part[(bi*nch+k)*c+j]
			}
		}
	}
	return out
}

// ChannelAffineAdd computes dst += alpha·a + beta per (sample, channel).
func (d *Device) ChannelAffineAdd(dst, a nn.Tensor, alpha, beta []float32) {
	const op = "ChannelAffineAdd"
	n, dd, h, w, c := dims5(op, dst)
	ds := cpuTensor(dst).data
	var as []float32
	if a != nil {
		as = mustShape(op, a, cpuTensor(dst).shape)
		if len(alpha) != n*c {
			panic(fmt.Sprintf("cpu.%s: alpha has %d values for N=%d C=%d", op, len(alpha), n, c))
		}
	}
	if beta != nil && len(beta) != n*c {
		panic(fmt.Sprintf("cpu.%s: beta has %d values for N=%d C=%d", op, len(beta), n, c))
	}
	v := dd * h * w
	d.parallelRange(n*v, elemBlock/c+1, func(lo, hi int) {
		for vox := lo; vox < hi; vox++ {
			b := vox / v
			row := ds[vox*c : (vox+1)*c]
			if as != nil {
				al := alpha[b*c : (b+1)*c]
				for j, x := range as[vox*c : (vox+1)*c] {
					row[j] += al[j] * x
				}
			}
			if beta != nil {
				for j, x := range beta[b*c : (b+1)*c] {
					row[j] += x
				}
			}
		}
	})
}

// SegCounts returns per-class TP, FP, FN of argmax(logits) against labels.
func (d *Device) SegCounts(logits, labels nn.Tensor) (tp, fp, fn []int64, err error) {
	return d.segCounts("SegCounts", logits, labels, -1)
}

// SegCountsIgnore is SegCounts without the voxels labelled ignore
// (nn.IgnoreLossDevice).
func (d *Device) SegCountsIgnore(logits, labels nn.Tensor, ignore int) (tp, fp, fn []int64, err error) {
	return d.segCounts("SegCountsIgnore", logits, labels, ignore)
}

func (d *Device) segCounts(op string, logits, labels nn.Tensor, ignore int) (tp, fp, fn []int64, err error) {
	n, v, c := labelDims(op, logits, labels)
	zs := cpuTensor(logits).data
	ls := cpuTensor(labels).data
	k := max(c, 2)
	total := n * v
	nch := chunks(total)
	part := make([]int64, nch*3*k)
	bads := make([]badLabel, nch)
	d.parallel(nch, func(i int) {
		p := part[i*3*k : (i+1)*3*k]
		for vox := i * chunkVoxels; vox < min(total, (i+1)*chunkVoxels); vox++ {
			if isIgnored(ls[vox], ignore) {
				continue
			}
			l := classOf(ls[vox], k)
			if l < 0 {
				if !bads[i].found {
					bads[i] = badLabel{true, ls[vox], vox}
				}
				continue
			}
			z := zs[vox*c : (vox+1)*c]
			pred := 0
			if c == 1 {
				if z[0] > 0 {
					pred = 1
				}
			} else {
				for j := 1; j < c; j++ {
					if z[j] > z[pred] {
						pred = j
					}
				}
			}
			if pred == l {
				p[l]++
			} else {
				p[k+pred]++
				p[2*k+l]++
			}
		}
	})
	if err := firstBad(op, bads, k); err != nil {
		return nil, nil, nil, err
	}
	tp, fp, fn = make([]int64, k), make([]int64, k), make([]int64, k)
	for i := 0; i < nch; i++ {
		for j := 0; j < k; j++ {
			tp[j] += part[i*3*k+j]
			fp[j] += part[i*3*k+k+j]
			fn[j] += part[i*3*k+2*k+j]
		}
	}
	return tp, fp, fn, nil
}
