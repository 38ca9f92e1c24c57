package cpu

import (
	"fmt"
	"math"

	"github.com/voxtrain/voxtrain/nn"
)

// The multi-label ops (nn.MultiLabelLossDevice): labels are bit-packed
// bytes, bit c set where the voxel belongs to class c, 255 the ignore
// value (see volume.PackedPath).

// ignoreByte is the ignore value of bit-packed labels.
const ignoreByte = 255

// bitsOf returns the class bits of label l for c classes, or ok false
// when l is not a byte whose set bits are all below c.
func bitsOf(l float32, c int) (bits uint8, ok bool) {
	k := int(l)
	if float32(k) != l || k < 0 || k > 255 || k>>c != 0 {
		return 0, false
	}
	return uint8(k), true
}

// firstBadBits is firstBad for bit-packed labels.
func firstBadBits(op string, bads []badLabel, c int, ignore bool) error {
	for _, b := range bads {
		if b.found {
			ig := ""
			if ignore {
				ig = " or 255 (ignore)"
			}
			return fmt.Errorf("%s: label %v at flat voxel %d is not a bit-packed byte of %d classes (bits 0..%d%s)", op, b.value, b.index, c, c-1, ig)
		}
	}
	return nil
}

// SigmoidMultiLabelLoss writes probs = σ(logits) and returns the sums of
// the multi-label loss against bit-packed labels, per sample and channel:
// CE is Σ BCEWithLogits over voxels, the Dice sums are σ's. With ignore,
// voxels labelled 255 add to no sum.
func (d *Device) SigmoidMultiLabelLoss(logits, labels, probs nn.Tensor, ignore bool) (nn.SegStats, error) {
	const op = "SigmoidMultiLabelLoss"
	n, v, c := labelDims(op, logits, labels)
	zs := cpuTensor(logits).data
	ls := cpuTensor(labels).data
	ps := mustLen(op, probs, len(zs))
	nch := chunks(v)
	// per chunk: counted voxels, then bce[c], intersect[c], psum[c], tsum[c]
	w := 1 + 4*c
	part := make([]float64, n*nch*w)
	bads := make([]badLabel, n*nch)
	d.parallel(n*nch, func(i int) {
		b, k := i/nch, i%nch
		p := part[i*w : (i+1)*w]
		bce, inter, psum, tsum := p[1:1+c], p[1+c:1+2*c], p[1+2*c:1+3*c], p[1+3*c:]
		for vox := b*v + k*chunkVoxels; vox < b*v+min(v, (k+1)*chunkVoxels); vox++ {
			z := zs[vox*c : (vox+1)*c]
			pr := ps[vox*c : (vox+1)*c]
			for j, x := range z {
				pr[j] = float32(1 / (1 + math.Exp(-float64(x))))
			}
			if ignore && ls[vox] == ignoreByte {
				continue
			}
			bits, ok := bitsOf(ls[vox], c)
			if !ok {
				if !bads[i].found {
					bads[i] = badLabel{true, ls[vox], vox}
				}
				continue
			}
			p[0]++
			for j, x := range z {
				q := float64(pr[j])
				psum[j] += q
				zf := float64(x)
				if bits>>j&1 != 0 {
					bce[j] += softplus(-zf)
					inter[j] += q
					tsum[j]++
				} else {
					bce[j] += softplus(zf)
				}
			}
		}
	})
	if err := firstBadBits(op, bads, c, ignore); err != nil {
		return nn.SegStats{}, err
	}
	st := nn.SegStats{N: n, C: c, Voxels: v,
		CE: make([]float64, n*c), Intersect: make([]float64, n*c),
		PredSum: make([]float64, n*c), TargetSum: make([]float64, n*c),
		Counted: make([]float64, n)}
	for b := 0; b < n; b++ {
		for k := 0; k < nch; k++ {
			p := part[(b*nch+k)*w : (b*nch+k+1)*w]
			st.Counted[b] += p[0]
			for j := 0; j < c; j++ {
				st.CE[b*c+j] += p[1+j]
				st.Intersect[b*c+j] += p[1+c+j]
				st.PredSum[b*c+j] += p[1+2*c+j]
				st.TargetSum[b*c+j] += p[1+3*c+j]
			}
		}
	}
	return st, nil
}

// SigmoidMultiLabelLossBackward writes
//
//	dlogits[n,v,c] = bceScale[n·C+c]·(p − t) + (alpha[n·C+c]·t + beta[n·C+c])·p·(1 − p)
//
// with p = probs and t bit c of the label, and zero at ignored voxels
// (and at invalid labels, which SigmoidMultiLabelLoss reported).
func (d *Device) SigmoidMultiLabelLossBackward(probs, labels nn.Tensor, bceScale, alpha, beta []float32, dlogits nn.Tensor, ignore bool) {
	const op = "SigmoidMultiLabelLossBackward"
	n, v, c := labelDims(op, probs, labels)
	ps := cpuTensor(probs).data
	ls := cpuTensor(labels).data
	ds := mustLen(op, dlogits, len(ps))
	if len(bceScale) != n*c || len(alpha) != n*c || len(beta) != n*c {
		panic(fmt.Sprintf("cpu.%s: %d bce scales, %d alphas, %d betas for %d samples of %d channels", op, len(bceScale), len(alpha), len(beta), n, c))
	}
	nch := chunks(v)
	d.parallel(n*nch, func(i int) {
		b, k := i/nch, i%nch
		for vox := b*v + k*chunkVoxels; vox < b*v+min(v, (k+1)*chunkVoxels); vox++ {
			pr := ps[vox*c : (vox+1)*c]
			dz := ds[vox*c : (vox+1)*c]
			bits, ok := bitsOf(ls[vox], c)
			if !ok || (ignore && ls[vox] == ignoreByte) {
				clear(dz)
				continue
			}
			for j, p := range pr {
				t := float32(bits >> j & 1)
				g := alpha[b*c+j]*t + beta[b*c+j]
				dz[j] = bceScale[b*c+j]*(p-t) + g*p*(1-p)
			}
		}
	})
}

// SegCountsMultiLabel returns TP, FP and FN voxel counts of σ(logits) >
// 0.5 (logits > 0) against the labels' bits per sample and channel
// ([n·C+c]), leaving out voxels labelled 255 with ignore.
func (d *Device) SegCountsMultiLabel(logits, labels nn.Tensor, ignore bool) (tp, fp, fn []int64, err error) {
	const op = "SegCountsMultiLabel"
	n, v, c := labelDims(op, logits, labels)
	zs := cpuTensor(logits).data
	ls := cpuTensor(labels).data
	nch := chunks(v)
	part := make([]int64, n*nch*3*c)
	bads := make([]badLabel, n*nch)
	d.parallel(n*nch, func(i int) {
		b, k := i/nch, i%nch
		p := part[i*3*c : (i+1)*3*c]
		for vox := b*v + k*chunkVoxels; vox < b*v+min(v, (k+1)*chunkVoxels); vox++ {
			if ignore && ls[vox] == ignoreByte {
				continue
			}
			bits, ok := bitsOf(ls[vox], c)
			if !ok {
				if !bads[i].found {
					bads[i] = badLabel{true, ls[vox], vox}
				}
				continue
			}
			for j, z := range zs[vox*c : (vox+1)*c] {
				pred, t := z > 0, bits>>j&1 != 0
				switch {
				case pred && t:
					p[j]++
				case pred:
					p[c+j]++
				case t:
					p[2*c+j]++
				}
			}
		}
	})
	if err := firstBadBits(op, bads, c, ignore); err != nil {
		return nil, nil, nil, err
	}
	tp, fp, fn = make([]int64, n*c), make([]int64, n*c), make([]int64, n*c)
	for i := 0; i < n*nch; i++ {
		b := i / nch
		for j := 0; j < c; j++ {
			tp[b*c+j] += part[i*3*c+j]
			fp[b*c+j] += part[i*3*c+c+j]
			fn[b*c+j] += part[i*3*c+2*c+j]
		}
	}
	return tp, fp, fn, nil
}
