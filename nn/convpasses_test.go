package nn_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/internal/geom"
	"github.com/voxtrain/voxtrain/nn"
)

// passRecorder is the CPU device recording the convolution passes it runs
// and those a workspace prepares (it is a ConvPreparer).
type passRecorder struct {
	*cpu.Device
	prepared [][]nn.ConvPass
	ran      []nn.ConvPass
}

func (r *passRecorder) PrepareConvs(ps []nn.ConvPass) error {
	r.prepared = append(r.prepared, slices.Clone(ps))
	return nil
}

func (r *passRecorder) Conv3DForward(g geom.Conv, x, w, b, y nn.Tensor) {
	r.ran = append(r.ran, nn.ConvPass{Kind: nn.ConvForward, Geom: g})
	r.Device.Conv3DForward(g, x, w, b, y)
}

func (r *passRecorder) Conv3DBackwardData(g geom.Conv, dy, w, dx nn.Tensor) {
	r.ran = append(r.ran, nn.ConvPass{Kind: nn.ConvBackwardData, Geom: g})
	r.Device.Conv3DBackwardData(g, dy, w, dx)
}

func (r *passRecorder) Conv3DBackwardWeight(g geom.Conv, x, dy, dw, db nn.Tensor) {
	r.ran = append(r.ran, nn.ConvPass{Kind: nn.ConvBackwardWeight, Geom: g})
	r.Device.Conv3DBackwardWeight(g, x, dy, dw, db)
}

// passSet returns the passes of ps, each once, as sorted lines.
func passSet(ps []nn.ConvPass) []string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%s %v→%d k%d×%d×%d s%d×%d×%d", p.Kind, p.Geom.InShape(), p.Geom.OutC, p.Geom.KD, p.Geom.KH, p.Geom.KW, p.Geom.SD, p.Geom.SH, p.Geom.SW))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestConvPassesAreTheStepsConvolutions checks that what a workspace
// hands a ConvPreparer before allocating (Workspace.ConvPasses) is exactly
// the convolutions its steps run, each once:
// a training step (forward, loss, backward, optimiser) and an inference
// forward pass, on the reference U-Net, with deep supervision, with two
// input channels and on both residual encoders. A pass it missed would be
// timed inside a step, at the step's peak memory; one too many would time
// a convolution no step runs.
func TestConvPassesAreTheStepsConvolutions(t *testing.T) {
	ref := config.Default().Model
	ref.Features = []int{4, 8, 8}
	ref.Strides = [][3]int{{1, 1, 1}, {2, 2, 2}, {2, 2, 2}}
	ds := ref
	ds.DeepSupervision, ds.InChannels, ds.NumClasses = true, 2, 3
	cases := map[string]config.Model{"reference": ref, "deep supervision, 2 channels": ds}
	for name, m := range residualCases() {
		cases["residual "+name] = m
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			rec := &passRecorder{Device: cpu.New(cpu.Options{Threads: 1})}
			r, err := nn.BenchStep(rec, cfg, nn.BenchOptions{Batch: 2, Patch: [3]int{8, 8, 8}, Steps: 1, Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			if len(rec.prepared) != 1 {
				t.Fatalf("%d workspaces prepared; want the training step's one", len(rec.prepared))
			}
			if got, want := passSet(rec.prepared[0]), passSet(rec.ran); !slices.Equal(got, want) || len(rec.prepared[0]) != len(got) {
				t.Errorf("training: prepared %d passes:\n  %s\nthe step ran:\n  %s", len(rec.prepared[0]), strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
			if len(rec.ran) == 0 || r.LossFirst == 0 {
				t.Fatalf("the step ran %d convolutions, loss %v", len(rec.ran), r.LossFirst)
			}

			rec = &passRecorder{Device: cpu.New(cpu.Options{Threads: 1})}
			m, err := nn.NewUNet(rec, cfg, 3)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Free()
			ws, err := m.NewWorkspace(1, [3]int{8, 8, 8}, false)
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Free()
			x := rec.Alloc(ws.InputShape())
			defer rec.Free(x)
			m.Forward(ws, x)
			if len(rec.prepared) != 1 {
				t.Fatalf("%d workspaces prepared; want the inference one", len(rec.prepared))
			}
			if got, want := passSet(rec.prepared[0]), passSet(rec.ran); !slices.Equal(got, want) || len(rec.prepared[0]) != len(got) {
				t.Errorf("inference: prepared %d passes:\n  %s\nthe forward pass ran:\n  %s", len(rec.prepared[0]), strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
		})
	}
}

// failingPreparer fails its preparation as a device out of memory does.
type failingPreparer struct{ *cpu.Device }

func (failingPreparer) PrepareConvs([]nn.ConvPass) error { return fmt.Errorf("out of device memory") }

// TestPrepareConvsErrorStopsTheWorkspace checks that a device's failure
// to prepare its convolutions is NewWorkspace's error, saying what failed.
func TestPrepareConvsErrorStopsTheWorkspace(t *testing.T) {
	dev := failingPreparer{cpu.New(cpu.Options{Threads: 1})}
	m, err := nn.NewUNet(dev, config.Default().Model, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	ws, err := m.NewWorkspace(1, [3]int{16, 16, 16}, true)
	if err == nil {
		ws.Free()
		t.Fatal("no error")
	}
	if want := "timing the convolutions' algorithms: out of device memory"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}
