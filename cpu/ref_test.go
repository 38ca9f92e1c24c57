package cpu

import (
	"math"

	"github.com/voxtrain/voxtrain/nn"
)

// Plain references for the fast ops of this package, written for clarity:
// one (sample, channel) at a time, float64 throughout, two-pass statistics.
// The tests hold the fast ops to these.

// refInstanceNormAct returns y and (mean, rstd) per (n, c) for x (n, v, c).
func refInstanceNormAct(x, gamma, beta []float32, n, v, c int, eps, slope float32) (y []float32, stats []float32) {
	y = make([]float32, len(x))
	stats = make([]float32, n*c*2)
	for b := 0; b < n; b++ {
		for j := 0; j < c; j++ {
			var mean float64
			for i := 0; i < v; i++ {
				mean += float64(x[(b*v+i)*c+j])
			}
			mean /= float64(v)
			var variance float64
			for i := 0; i < v; i++ {
				d := float64(x[(b*v+i)*c+j]) - mean
				variance += d * d
			}
			variance /= float64(v)
			rstd := 1 / math.Sqrt(variance+float64(eps))
			stats[(b*c+j)*2], stats[(b*c+j)*2+1] = float32(mean), float32(rstd)
			for i := 0; i < v; i++ {
				k := (b*v+i)*c + j
				z := (float64(x[k])-mean)*rstd*float64(gamma[j]) + float64(beta[j])
				if z < 0 {
					z *= float64(slope)
				}
				y[k] = float32(z)
			}
		}
	}
	return y, stats
}

// refInstanceNormActBackward returns dx, dgamma, dbeta: the activation's
// derivative (judged from the forward output) then the norm's backward.
func refInstanceNormActBackward(x, gamma, beta, dy []float32, n, v, c int, eps, slope float32) (dx, dgamma, dbeta []float32) {
	y, stats := refInstanceNormAct(x, gamma, beta, n, v, c, eps, slope)
	g := refActGrad(y, dy, slope)
	dx = make([]float32, len(x))
	dg := make([]float64, c)
	db := make([]float64, c)
	for b := 0; b < n; b++ {
		for j := 0; j < c; j++ {
			mean, rstd := float64(stats[(b*c+j)*2]), float64(stats[(b*c+j)*2+1])
			var sg, sgx float64
			for i := 0; i < v; i++ {
				k := (b*v+i)*c + j
				sg += float64(g[k])
				sgx += float64(g[k]) * (float64(x[k]) - mean) * rstd
			}
			for i := 0; i < v; i++ {
				k := (b*v+i)*c + j
				xh := (float64(x[k]) - mean) * rstd
				dx[k] = float32(float64(gamma[j]) * rstd * (float64(g[k]) - sg/float64(v) - xh*sgx/float64(v)))
			}
			dg[j] += sgx
			db[j] += sg
		}
	}
	dgamma, dbeta = make([]float32, c), make([]float32, c)
	for j := range dg {
		dgamma[j], dbeta[j] = float32(dg[j]), float32(db[j])
	}
	return dx, dgamma, dbeta
}

// refActGrad applies the activation derivative, judged from the output y.
func refActGrad(y, dy []float32, slope float32) []float32 {
	g := make([]float32, len(dy))
	for i := range dy {
		g[i] = dy[i]
		if y[i] <= 0 {
			g[i] *= slope
		}
	}
	return g
}

// refSoftmaxLoss returns probs and the SegStats sums.
func refSoftmaxLoss(z, labels []float32, n, v, c int) ([]float32, nn.SegStats) {
	p := make([]float32, len(z))
	st := nn.SegStats{N: n, C: c, Voxels: v, CE: make([]float64, n), Intersect: make([]float64, n*c),
		PredSum: make([]float64, n*c), TargetSum: make([]float64, n*c)}
	for b := 0; b < n; b++ {
		for i := 0; i < v; i++ {
			row := z[(b*v+i)*c : (b*v+i+1)*c]
			m := math.Inf(-1)
			for _, x := range row {
				m = math.Max(m, float64(x))
			}
			var s float64
			for _, x := range row {
				s += math.Exp(float64(x) - m)
			}
			l := int(labels[b*v+i])
			for j, x := range row {
				q := math.Exp(float64(x)-m) / s
				p[(b*v+i)*c+j] = float32(q)
				st.PredSum[b*c+j] += q
				if j == l {
					st.Intersect[b*c+j] += q
					st.TargetSum[b*c+j]++
					st.CE[b] -= math.Log(q)
				}
			}
		}
	}
	return p, st
}

// refSoftmaxLossBackward returns dlogits.
func refSoftmaxLossBackward(p, labels []float32, n, v, c int, ceScale, alpha, beta, extra []float32) []float32 {
	dz := make([]float32, len(p))
	for b := 0; b < n; b++ {
		for i := 0; i < v; i++ {
			l := int(labels[b*v+i])
			row := p[(b*v+i)*c : (b*v+i+1)*c]
			q := make([]float64, c)
			var dot float64
			for j := range q {
				q[j] = float64(beta[b*c+j])
				if j == l {
					q[j] += float64(alpha[b*c+j])
				}
				if extra != nil {
					q[j] += float64(extra[(b*v+i)*c+j])
				}
				dot += float64(row[j]) * q[j]
			}
			for j := range q {
				oh := 0.0
				if j == l {
					oh = 1
				}
				dz[(b*v+i)*c+j] = float32(float64(row[j])*(q[j]-dot) + float64(ceScale[b])*(float64(row[j])-oh))
			}
		}
	}
	return dz
}
