package nn_test

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/nn"
)

// hostGrad copies a parameter's gradient (CPU device: host memory).
func hostGrad(p *nn.Param) []float32 {
	return slices.Clone(p.G.(interface{ Data() []float32 }).Data())
}

// BackwardReady reports every parameter exactly once, only once its
// gradient is final (the gradient at the report is the one backward ends
// with), and computes the gradients Backward does, bit for bit; the
// models cover deep supervision, norm and bias on and off.
func TestBackwardReadyReportsEveryParameterOnceWhenFinal(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*config.Model)
	}{
		{"deep supervision, norm", func(m *config.Model) { m.DeepSupervision = true; m.ConvsPerLevel = 2 }},
		{"no norm, conv bias", func(m *config.Model) { m.Norm = "none"; m.ConvBias = true }},
		{"plain", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := cpu.New(cpu.Options{Threads: 1})
			m, err := nn.NewUNet(dev, model([]int{4, 8, 8}, tc.mod), 3)
			if err != nil {
				t.Fatal(err)
			}
			l, err := nn.NewLearner(m, 2, smallPatch, config.Default().Loss, config.Default().Optim)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Free()
			xs, ys := syntheticBatch(rand.New(rand.NewPCG(1, 2)), 2, smallPatch)
			x, y := upload(t, dev, l.WS.InputShape(), xs), upload(t, dev, l.WS.LabelShape(), ys)
			backward := func(ready func([]*nn.Param)) [][]float32 {
				if _, err := l.Loss.Compute(m.Forward(l.WS, x), y); err != nil {
					t.Fatal(err)
				}
				for _, p := range m.Params() { // stale values a missed write would leave
					d := p.G.(interface{ Data() []float32 }).Data()
					for i := range d {
						d[i] = 7
					}
				}
				if ready == nil {
					m.Backward(l.WS, l.Loss.Grads())
				} else {
					m.BackwardReady(l.WS, l.Loss.Grads(), ready)
				}
				var gs [][]float32
				for _, p := range m.Params() {
					gs = append(gs, hostGrad(p))
				}
				return gs
			}
			want := backward(nil)
			seen := map[*nn.Param]int{}
			atReport := map[*nn.Param][]float32{}
			var order []string
			got := backward(func(ps []*nn.Param) {
				if len(ps) == 0 {
					t.Error("ready called with no parameters")
				}
				for _, p := range ps {
					seen[p]++
					atReport[p] = hostGrad(p)
					order = append(order, p.Name)
				}
			})
			for i, p := range m.Params() {
				if seen[p] != 1 {
					t.Errorf("%s reported %d times, want once", p.Name, seen[p])
					continue
				}
				if !slices.Equal(atReport[p], got[i]) {
					t.Errorf("%s: its gradient changed after it was reported ready", p.Name)
				}
				if !slices.Equal(got[i], want[i]) {
					t.Errorf("%s: BackwardReady's gradient differs from Backward's", p.Name)
				}
			}
			if len(order) != len(m.Params()) {
				t.Errorf("%d reports for %d parameters", len(order), len(m.Params()))
			}
			if len(order) > 0 && !strings.HasPrefix(order[0], "head.") {
				t.Errorf("first reported %s, want the head (backward starts there)", order[0])
			}
		})
	}
}

// recordingSync is a GradSync that logs its calls and, in Finish, doubles
// every gradient (a stand-in for a mean over ranks).
type recordingSync struct {
	params []*nn.Param
	calls  []string
	ready  int
	err    error
}

func (s *recordingSync) Begin() { s.calls = append(s.calls, "begin") }

func (s *recordingSync) Ready(ps []*nn.Param) {
	if len(s.calls) == 0 || s.calls[len(s.calls)-1] != "ready" {
		s.calls = append(s.calls, "ready")
	}
	s.ready += len(ps)
}

func (s *recordingSync) Finish() error {
	s.calls = append(s.calls, "finish")
	if s.err != nil {
		return s.err
	}
	for _, p := range s.params {
		d := p.G.(interface{ Data() []float32 }).Data()
		for i := range d {
			d[i] *= 2
		}
	}
	return nil
}

// Learner.Step with a GradSync calls Begin, Ready for every parameter,
// then Finish before the optimiser, whose update uses Finish's gradients:
// the weights equal those of ReduceGrads doing the same after backward.
// Finish's error fails the step, wrapped.
func TestStepWithGradSyncFinishesBeforeTheOptimiser(t *testing.T) {
	run := func(useSync bool, fail error) ([]nn.HostTensor, *recordingSync, error) {
		dev := cpu.New(cpu.Options{Threads: 1})
		m, l := newSmallLearner(t, dev, config.Default().Optim, 42)
		defer l.Free()
		s := &recordingSync{params: m.Params(), err: fail}
		if useSync {
			l.Sync = s
		} else {
			l.ReduceGrads = func(ps []*nn.Param) error { return s.Finish() }
		}
		rng := rand.New(rand.NewPCG(7, 7))
		for range 2 {
			xs, ys := syntheticBatch(rng, 2, smallPatch)
			x, y := upload(t, dev, l.WS.InputShape(), xs), upload(t, dev, l.WS.LabelShape(), ys)
			if _, err := l.Step(x, y, 0.01); err != nil {
				return nil, s, err
			}
		}
		w, err := nn.ExportParams(dev, m.Params())
		if err != nil {
			t.Fatal(err)
		}
		return w, s, nil
	}
	want, _, err := run(false, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, s, err := run(true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.calls, []string{"begin", "ready", "finish", "begin", "ready", "finish"}) {
		t.Errorf("calls %v", s.calls)
	}
	if n := 2 * len(s.params); s.ready != n {
		t.Errorf("%d parameters reported ready over 2 steps, want %d", s.ready, n)
	}
	for i := range want {
		if !slices.Equal(got[i].Data, want[i].Data) {
			t.Fatalf("%s: weights after Sync differ from those after ReduceGrads", want[i].Name)
		}
	}
	dead := errors.New("rank 1 died")
	if _, _, err := run(true, dead); !errors.Is(err, dead) || !strings.Contains(err.Error(), "train step: gradients: rank 1 died") {
		t.Errorf("failing Finish: %v", err)
	}
}
