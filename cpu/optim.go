package cpu

import (
	"fmt"
	"math"

	"github.com/voxtrain/voxtrain/nn"
)

// flatChunk is the fixed chunk of a flat reduction (see chunkVoxels).
const flatChunk = 1 << 14

// SumSquares returns Σ t² for each tensor, each summed in fixed chunks.
func (d *Device) SumSquares(ts []nn.Tensor) []float64 {
	type job struct{ t, lo, hi int }
	var jobs []job
	for i, t := range ts {
		n := len(cpuTensor(t).data)
		for lo := 0; lo < n; lo += flatChunk {
			jobs = append(jobs, job{i, lo, min(n, lo+flatChunk)})
		}
	}
	part := make([]float64, len(jobs))
	d.parallel(len(jobs), func(j int) {
		x := cpuTensor(ts[jobs[j].t]).data[jobs[j].lo:jobs[j].hi]
		var s float64
		for _, v := range x {
			s += float64(v) * float64(v)
		}
		part[j] = s
	})
	out := make([]float64, len(ts))
	for j, jb := range jobs {
		out[jb.t] += part[j]
	}
	return out
}

// SGDUpdate applies one SGD step to each tensor (PyTorch semantics, see
// nn.SGDArgs).
func (d *Device) SGDUpdate(w, g, buf []nn.Tensor, a nn.SGDArgs) {
	checkLists("SGDUpdate", len(w), g)
	if a.Momentum != 0 {
		checkLists("SGDUpdate", len(w), buf)
	}
	for i := range w {
		var b nn.Tensor
		if a.Momentum != 0 {
			b = buf[i]
		}
		d.sgdUpdate(w[i], g[i], b, a)
	}
}

// AdamWUpdate applies one AdamW step to each tensor (PyTorch semantics).
func (d *Device) AdamWUpdate(w, g, m, v []nn.Tensor, a nn.AdamWArgs) {
	checkLists("AdamWUpdate", len(w), g, m, v)
	for i := range w {
		d.adamWUpdate(w[i], g[i], m[i], v[i], a)
	}
}

// checkLists panics unless every list holds n tensors.
func checkLists(op string, n int, lists ...[]nn.Tensor) {
	for _, l := range lists {
		if len(l) != n {
			panic(fmt.Sprintf("cpu.%s: lists of %d and %d tensors", op, n, len(l)))
		}
	}
}

func (d *Device) sgdUpdate(w, g, buf nn.Tensor, a nn.SGDArgs) {
	ws := cpuTensor(w).data
	gs := mustLen("SGDUpdate", g, len(ws))
	var bs []float32
	if a.Momentum != 0 {
		bs = mustLen("SGDUpdate", buf, len(ws))
	}
	d.parallelRange(len(ws), elemBlock, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			dp := gs[i] * a.GradScale
			if a.WeightDecay != 0 {
				dp += a.WeightDecay * ws[i]
			}
			if bs != nil {
				b := a.Momentum*bs[i] + dp
				bs[i] = b
				if a.Nesterov {
					dp += a.Momentum * b
				} else {
					dp = b
				}
			}
			ws[i] -= a.LR * dp
		}
	})
}

func (d *Device) adamWUpdate(w, g, m, v nn.Tensor, a nn.AdamWArgs) {
	if a.Step < 1 {
		panic(fmt.Sprintf("cpu.AdamWUpdate: step %d, want >= 1", a.Step))
	}
	ws := cpuTensor(w).data
	gs := mustLen("AdamWUpdate", g, len(ws))
	ms := mustLen("AdamWUpdate", m, len(ws))
	vs := mustLen("AdamWUpdate", v, len(ws))
	bc1 := 1 - math.Pow(float64(a.Beta1), float64(a.Step))
	bc2 := 1 - math.Pow(float64(a.Beta2), float64(a.Step))
	stepSize := float32(float64(a.LR) / bc1)
	bc2sqrt := float32(math.Sqrt(bc2))
	decay := 1 - a.LR*a.WeightDecay
	d.parallelRange(len(ws), elemBlock, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			gi := gs[i] * a.GradScale
			wi := ws[i] * decay
			mi := a.Beta1*ms[i] + (1-a.Beta1)*gi
			vi := a.Beta2*vs[i] + (1-a.Beta2)*gi*gi
			ms[i], vs[i] = mi, vi
			denom := float32(math.Sqrt(float64(vi)))/bc2sqrt + a.Eps
			ws[i] = wi - stepSize*mi/denom
		}
	})
}
