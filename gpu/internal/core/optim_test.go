//go:build cgo

package core_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/gpu/internal/core"
	"github.com/voxtrain/voxtrain/nn"
)

// TestOptimiserLaunchesPerStep: however many parameters, an optimiser step
// is two launches for the gradients' sums of squares and one for the
// update (the tensor-list kernels), the lists' tables are copied to the
// device at the first step only, and the results are the CPU device's.
// More lists than the device keeps (maxListTables) are still right.
//
// With Options.PerTensorOptimiser (VOXTRAIN_OPTIM_LISTS=0) the same steps
// are two launches per tensor for the sums and one for the update, no
// tables, the same bits.
func TestOptimiserLaunchesPerStep(t *testing.T) {
	for _, perTensor := range []bool{false, true} {
		t.Run(fmt.Sprintf("PerTensorOptimiser=%v", perTensor), func(t *testing.T) { testOptimiserLaunches(t, perTensor) })
	}
}

func testOptimiserLaunches(t *testing.T, perTensor bool) {
	dev := newEmuDevice(core.Options{FlatChunk: 1000, PerTensorOptimiser: perTensor})
	defer dev.Close()
	ref := cpu.New(cpu.Options{Threads: 1})
	r := rand.New(rand.NewPCG(7, 8))
	sizes := []int{27 * 4, 4, 4, 4, 2500, 1, 32, 0, 1000, 3 * 8}
	var ws, gs, bs, wr, gr, br []nn.Tensor
	for _, n := range sizes {
		for _, l := range []struct {
			dev, ref *[]nn.Tensor
		}{{&ws, &wr}, {&gs, &gr}, {&bs, &br}} {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			*l.dev = append(*l.dev, upload(t, dev, x))
			*l.ref = append(*l.ref, cpu.NewTensor(nn.Shape{n}, append([]float32(nil), x...)))
		}
	}
	a := nn.SGDArgs{LR: 0.01, Momentum: 0.99, WeightDecay: 3e-5, Nesterov: true, GradScale: 0.5}
	for step := 0; step < 3; step++ {
		launches, writes := total(dev.be.l.Launched()), dev.be.writes
		got := dev.SumSquares(gs)
		dev.SGDUpdate(ws, gs, bs, a)
		if err := dev.Err(); err != nil {
			t.Fatal(err)
		}
		wantLaunches, wantCopies := 3, map[bool]int{true: 2, false: 0}[step == 0]
		if perTensor {
			// An empty tensor's sum is one fill; its update no launch.
			wantLaunches, wantCopies = 3*len(sizes)-2, 0
		}
		if n := total(dev.be.l.Launched()) - launches; n != wantLaunches {
			t.Errorf("step %d: %d launches for %d parameters, want %d", step, n, len(sizes), wantLaunches)
		}
		if n := dev.be.writes - writes; n != wantCopies {
			t.Errorf("step %d: %d table copies, want %d", step, n, wantCopies)
		}
		want := ref.SumSquares(gr)
		ref.SGDUpdate(wr, gr, br, a)
		for i := range sizes {
			if d := got[i] - want[i]; d > 1e-9*want[i] || -d > 1e-9*want[i] {
				t.Errorf("step %d: sum of squares of tensor %d: %v, CPU %v", step, i, got[i], want[i])
			}
			sameData(t, fmt.Sprintf("step %d: weights %d", step, i), download(t, dev, ws[i]), wr[i].(*cpu.Tensor).Data())
			sameData(t, fmt.Sprintf("step %d: momentum %d", step, i), download(t, dev, bs[i]), br[i].(*cpu.Tensor).Data())
		}
	}
	// Twelve different lists (every suffix of the parameters), twice:
	// tables leave the device and come back.
	for round := 0; round < 2; round++ {
		for k := range 12 {
			lo := k % len(sizes)
			dev.SGDUpdate(ws[lo:], gs[lo:], bs[lo:], a)
			ref.SGDUpdate(wr[lo:], gr[lo:], br[lo:], a)
		}
	}
	if err := dev.Err(); err != nil {
		t.Fatal(err)
	}
	for i := range sizes {
		sameData(t, fmt.Sprintf("after 24 lists: weights %d", i), download(t, dev, ws[i]), wr[i].(*cpu.Tensor).Data())
	}
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func upload(t *testing.T, dev *emuDevice, x []float32) nn.Tensor {
	t.Helper()
	d := dev.Alloc(nn.Shape{len(x)})
	if err := dev.Upload(dev.ComputeStream(), d, x); err != nil {
		t.Fatal(err)
	}
	return d
}

func download(t *testing.T, dev *emuDevice, x nn.Tensor) []float32 {
	t.Helper()
	out := make([]float32, x.Shape().Len())
	if err := dev.Download(dev.ComputeStream(), out, x); err != nil {
		t.Fatal(err)
	}
	return out
}

// sameData requires the same float32 values (the update kernels repeat
// the CPU's arithmetic bit for bit).
func sameData(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%s[%d] = %v, CPU %v", what, i, got[i], want[i])
			return
		}
	}
}
