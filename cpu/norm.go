package cpu

import (
	"fmt"
	"math"

	"github.com/voxtrain/voxtrain/nn"
)

// normDims checks the tensors of an instance-norm call and returns
// (N, voxels per sample, C).
func normDims(op string, x, gamma, stats nn.Tensor) (n, v, c int) {
	n, dd, h, w, c := dims5(op, x)
	mustLen(op, gamma, c)
	mustShape(op, stats, nn.Shape{n, c, 2})
	return n, dd * h * w, c
}

// actFactors returns the activation's derivative indexed by the sign bit
// of its input or output: [1, slope]. Indexing by the sign bit instead of
// branching matters: the signs of normalised activations are random, and a
// mispredicted branch per element made these loops ~8× slower.
func actFactors(slope float32) [2]float32 { return [2]float32{1, slope} }

// signBit returns 1 for negative x (and −0), else 0.
func signBit(x float32) uint32 { return math.Float32bits(x) >> 31 }

// InstanceNormActForward normalises x per (sample, channel), applies
// gamma/beta and the activation max(z, slope·z), and stores mean and
// 1/sqrt(var+eps) in stats. Two passes over x: statistics (fixed voxel
// chunks, float64 partial sums), then the fused affine+activation.
func (d *Device) InstanceNormActForward(x, gamma, beta, y, stats nn.Tensor, eps, slope float32) {
	const op = "InstanceNormActForward"
	checkSlope(op, slope)
	n, v, c := normDims(op, x, gamma, stats)
	xs := cpuTensor(x).data
	ys := mustLen(op, y, len(xs))
	gs := cpuTensor(gamma).data
	bs := mustLen(op, beta, c)
	st := cpuTensor(stats).data

	nch := chunks(v)
	part := make([]float64, n*nch*2*c)
	d.parallel(n*nch, func(i int) {
		b, k := i/nch, i%nch
		s := part[i*2*c : i*2*c+c : i*2*c+c]
		q := part[i*2*c+c : (i+1)*2*c : (i+1)*2*c]
		lo, hi := k*chunkVoxels, min(v, (k+1)*chunkVoxels)
		normSums(xs[(b*v+lo)*c:(b*v+hi)*c], c, s, q)
	})
	for b := 0; b < n; b++ {
		for j := 0; j < c; j++ {
			var s, q float64
			for k := 0; k < nch; k++ {
				p := part[(b*nch+k)*2*c:]
				s += p[j]
				q += p[c+j]
			}
			mean := s / float64(v)
			variance := max(q/float64(v)-mean*mean, 0)
			st[(b*c+j)*2] = float32(mean)
			st[(b*c+j)*2+1] = float32(1 / math.Sqrt(variance+float64(eps)))
		}
	}
	fac := actFactors(slope)
	d.parallel(n*nch, func(i int) {
		b, k := i/nch, i%nch
		mean, scale := normAffine(st, gs, b, c)
		shift := bs[:c:c]
		lo, hi := k*chunkVoxels, min(v, (k+1)*chunkVoxels)
		normAct(xs[(b*v+lo)*c:(b*v+hi)*c], ys[(b*v+lo)*c:(b*v+hi)*c], c, mean, scale, shift, fac)
	})
}

// normAffine returns sample b's per-channel mean and scale = rstd·γ, the
// forward's z = (x − mean)·scale + β computed the same way everywhere so
// that the backward sees the forward's signs exactly.
func normAffine(st, gamma []float32, b, c int) (mean, scale []float32) {
	mean, scale = make([]float32, c), make([]float32, c)
	for j := 0; j < c; j++ {
		mean[j] = st[(b*c+j)*2]
		scale[j] = st[(b*c+j)*2+1] * gamma[j]
	}
	return mean, scale
}

// InstanceNormActBackward computes dx, dgamma, dbeta. With z = γ·x̂ + β
// recomputed from x (cheaper than reading the forward's output), g =
// dy·act'(z) and x̂ = (x−mean)·rstd:
//
//	dβ = Σ g,  dγ = Σ g·x̂,  dx = γ·rstd·(g − mean(g) − x̂·mean(g·x̂))
//
// (sums over voxels and, for dγ and dβ, samples). The first pass sums g and
// g·x (Σ g·x̂ = rstd·(Σ g·x − mean·Σ g)), the second writes dx.
func (d *Device) InstanceNormActBackward(x, gamma, beta, stats, dy, dx, dgamma, dbeta nn.Tensor, slope float32) {
	const op = "InstanceNormActBackward"
	checkSlope(op, slope)
	n, v, c := normDims(op, x, gamma, stats)
	xs := cpuTensor(x).data
	bs := mustLen(op, beta, c)
	dys := mustLen(op, dy, len(xs))
	dxs := mustLen(op, dx, len(xs))
	gs := cpuTensor(gamma).data
	dgs := mustLen(op, dgamma, c)
	dbs := mustLen(op, dbeta, c)
	st := cpuTensor(stats).data
	fac := actFactors(slope)

	nch := chunks(v)
	part := make([]float64, n*nch*2*c)
	d.parallel(n*nch, func(i int) {
		b, k := i/nch, i%nch
		sg := part[i*2*c : i*2*c+c : i*2*c+c]
		sgx := part[i*2*c+c : (i+1)*2*c : (i+1)*2*c]
		mean, scale := normAffine(st, gs, b, c)
		shift := bs[:c:c]
		lo, hi := (b*v+k*chunkVoxels)*c, (b*v+min(v, (k+1)*chunkVoxels))*c
		normActGradSums(xs[lo:hi], dys[lo:hi], c, mean, scale, shift, fac, sg, sgx)
	})
	// Per (sample, channel) totals of g and g·x̂, combined in chunk order.
	tot := make([]float64, n*2*c)
	for b := 0; b < n; b++ {
		for k := 0; k < nch; k++ {
			p := part[(b*nch+k)*2*c : (b*nch+k+1)*2*c]
			t := tot[b*2*c : (b+1)*2*c]
			for j := range p {
				t[j] += p[j]
			}
		}
		for j := 0; j < c; j++ {
			mean, rstd := float64(st[(b*c+j)*2]), float64(st[(b*c+j)*2+1])
			tot[b*2*c+c+j] = rstd * (tot[b*2*c+c+j] - mean*tot[b*2*c+j])
		}
	}
	for j := 0; j < c; j++ {
		var g, gx float64
		for b := 0; b < n; b++ {
			g += tot[b*2*c+j]
			gx += tot[b*2*c+c+j]
		}
		dbs[j], dgs[j] = float32(g), float32(gx)
	}
	d.parallel(n*nch, func(i int) {
		b, k := i/nch, i%nch
		// dx = A·g + B·(x − mean) + C per channel, with A = γ·rstd,
		// B = −A·rstd·mean(g·x̂), C = −A·mean(g).
		mean, scale := normAffine(st, gs, b, c)
		shift := bs[:c:c]
		A := make([]float32, c)
		B := make([]float32, c)
		C := make([]float32, c)
		for j := 0; j < c; j++ {
			rstd := float64(st[(b*c+j)*2+1])
			a := float64(gs[j]) * rstd
			A[j] = float32(a)
			B[j] = float32(-a * rstd * tot[b*2*c+c+j] / float64(v))
			C[j] = float32(-a * tot[b*2*c+j] / float64(v))
		}
		lo, hi := (b*v+k*chunkVoxels)*c, (b*v+min(v, (k+1)*chunkVoxels))*c
		normActGrad(xs[lo:hi], dys[lo:hi], dxs[lo:hi], c, mean, scale, shift, A, B, C, fac)
	})
}

// ActForward computes y = max(x, slope·x) (for slope ≤ 1).
func (d *Device) ActForward(x, y nn.Tensor, slope float32) {
	checkSlope("ActForward", slope)
	xs := cpuTensor(x).data
	ys := mustLen("ActForward", y, len(xs))
	fac := actFactors(slope)
	d.parallelRange(len(xs), elemBlock, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			z := xs[i]
			ys[i] = z * fac[signBit(z)]
		}
	})
}

// ActBackward computes dx = dy·(y > 0 ? 1 : slope).
func (d *Device) ActBackward(y, dy, dx nn.Tensor, slope float32) {
	checkSlope("ActBackward", slope)
	ys := cpuTensor(y).data
	dys := mustLen("ActBackward", dy, len(ys))
	dxs := mustLen("ActBackward", dx, len(ys))
	fac := actFactors(slope)
	d.parallelRange(len(ys), elemBlock, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			dxs[i] = dys[i] * fac[signBit(ys[i])]
		}
	})
}

// checkSlope rejects slopes for which y's sign no longer tells z's.
func checkSlope(op string, slope float32) {
	if slope < 0 || slope > 1 {
		panic(fmt.Sprintf("cpu.%s: slope %v outside [0, 1]", op, slope))
	}
}
