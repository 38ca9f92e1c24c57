//go:build cgo

package core_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/gpu/internal/core"
	"github.com/voxtrain/voxtrain/gpu/internal/devcheck"
	"github.com/voxtrain/voxtrain/gpu/internal/dnn"
	"github.com/voxtrain/voxtrain/internal/geom"
	"github.com/voxtrain/voxtrain/kernels/emu"
	"github.com/voxtrain/voxtrain/nn"
)

// dnnDevice returns an emulated device whose convolutions go through a
// fake cuDNN with the given engine options.
func dnnDevice(p dnn.Precision, o dnn.Options) (*emuDevice, *fakeDNN, *dnn.Engine[*emu.Buffer]) {
	dev := newEmuDevice(core.Options{BF16: p == dnn.BF16, ConvWorkspace: 4 << 10,
		Name: fmt.Sprintf("emulated CUDA device, fake cuDNN, %s", p)})
	f := newFakeDNN()
	e := dnn.New[*emu.Buffer](f, o)
	dev.UseDNN(e, p)
	return dev, f, e
}

// TestConvDNNUnderEmulation runs the convolution ops (forward, backward
// data and weight, transposed, strided, pointwise) through the cuDNN path
// in each precision against the CPU device: descriptors, bf16 operands
// and their widening, workspaces and algorithm choice, every call checked
// by the fake library as cuDNN checks it. No GEMM may be issued: cuDNN
// computed every convolution.
func TestConvDNNUnderEmulation(t *testing.T) {
	for _, tc := range []struct {
		p    dnn.Precision
		tol  devcheck.Tolerances
		algo int32
	}{{dnn.FP32, devcheck.FP32, 3}, {dnn.TF32, devcheck.FP32, 4}, {dnn.BF16, devcheck.BF16, 4}} {
		t.Run(tc.p.String(), func(t *testing.T) {
			dev, f, e := dnnDevice(tc.p, dnn.Options{})
			devcheck.Ops(t, dev, devcheck.Options{Seed: 7, Tol: tc.tol, Only: []string{"Conv3D"}})
			if dev.be.gemms != 0 {
				t.Errorf("%d GEMMs issued: some convolution did not go to cuDNN", dev.be.gemms)
			}
			for _, k := range []dnn.Kind{dnn.Forward, dnn.BackwardData, dnn.BackwardFilter} {
				if f.finds[k] == 0 {
					t.Errorf("no Find for the %s pass", k)
				}
			}
			// The fastest algorithm needs 1 TiB of workspace; the next
			// runs on TF32 tensor cores: the choice in tf32 and bf16 (run
			// with its math type, not the descriptor's), not in fp32,
			// which takes the next, not deterministic.
			if f.runs[tc.algo] == 0 || len(f.runs) != 1 {
				t.Errorf("runs by algorithm %v, want only algorithm %d", f.runs, tc.algo)
			}
			if n := e.Notes(); len(n) != 0 {
				t.Errorf("notes: %q", n)
			}
			if err := dev.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestDNNChoice: deterministic mode takes the fastest deterministic
// algorithm that fits the workspace limit; a limit below its need takes
// the next; a choice is timed once per problem and pass, then reused.
func TestDNNChoice(t *testing.T) {
	dev, f, _ := dnnDevice(dnn.FP32, dnn.Options{Deterministic: true})
	devcheck.Ops(t, dev, devcheck.Options{Seed: 8, Only: []string{"Conv3D"}})
	if f.runs[1] == 0 || len(f.runs) != 1 {
		t.Errorf("deterministic: runs by algorithm %v, want only algorithm 1", f.runs)
	}
	finds := f.finds[dnn.Forward]
	devcheck.Ops(t, dev, devcheck.Options{Seed: 9, Only: []string{"Conv3D"}})
	if f.finds[dnn.Forward] != finds {
		t.Errorf("the same shapes again timed %d more forward algorithms", f.finds[dnn.Forward]-finds)
	}

	// Algorithm 1's workspace is 4 bytes per output element; a 64-byte
	// limit leaves algorithm 0.
	dev, f, _ = dnnDevice(dnn.FP32, dnn.Options{Deterministic: true, WorkspaceLimit: 64})
	devcheck.Ops(t, dev, devcheck.Options{Seed: 8, Only: []string{"Conv3D"}})
	if f.runs[0] == 0 || len(f.runs) != 1 {
		t.Errorf("64-byte workspace: runs by algorithm %v, want only algorithm 0", f.runs)
	}
}

// TestDNNFallback: where cuDNN supports no algorithm (as for shapes it
// has no kernel for),
// the device computes the convolution itself, says so once per problem,
// and every result still matches the CPU. Here cuDNN supports no problem
// with fewer than 4 input channels or 4 output channels.
func TestDNNFallback(t *testing.T) {
	dev, f, e := dnnDevice(dnn.BF16, dnn.Options{})
	f.unsupported = func(p *dnn.Problem) bool { return p.X.Dims[1] < 4 || p.Y.Dims[1] < 4 }
	devcheck.Ops(t, dev, devcheck.Options{Seed: 10, Tol: devcheck.BF16, Only: []string{"Conv3D"}})
	if dev.be.gemms == 0 {
		t.Error("no GEMM: the unsupported problems were not computed by the own convolutions")
	}
	if f.runs[4] == 0 {
		t.Error("no convolution went to cuDNN")
	}
	notes := e.Notes()
	if len(notes) < 3 || !strings.Contains(notes[0], "no algorithm") || !strings.Contains(notes[0], "none of 5 algorithms supports it (5× status 3000)") ||
		!strings.Contains(strings.Join(notes, "\n"), "voxtrain's own convolution (cuDNN has no algorithm for it, whole or per sample)") {
		t.Errorf("notes %q, want one per unsupported problem naming why, and what computes it", notes)
	}
	seen := map[string]bool{}
	for _, n := range notes {
		if seen[n] {
			t.Errorf("note repeated: %q", n)
		}
		seen[n] = true
	}
}

// TestDNNPerSample: where cuDNN refuses a problem for the whole batch
// but takes it a sample at a time (its NDHWC kernels do so for some large
// tensors), each sample is a call of its own — the weight gradient
// accumulated over the samples — and the results match the CPU, with no
// own convolution.
func TestDNNPerSample(t *testing.T) {
	for _, p := range []dnn.Precision{dnn.FP32, dnn.BF16} {
		tol := devcheck.FP32
		if p == dnn.BF16 {
			tol = devcheck.BF16
		}
		dev, f, e := dnnDevice(p, dnn.Options{})
		f.unsupported = func(p *dnn.Problem) bool { return p.X.Dims[0] > 1 }
		devcheck.Ops(t, dev, devcheck.Options{Seed: 12, Tol: tol, Only: []string{"Conv3D"}})
		if dev.be.gemms != 0 {
			t.Errorf("%s: %d GEMMs: some convolution went to the own path", p, dev.be.gemms)
		}
		if f.runs[3]+f.runs[4] == 0 {
			t.Errorf("%s: runs %v", p, f.runs)
		}
		if n := strings.Join(e.Notes(), "\n"); !strings.Contains(n, "cuDNN, one sample at a time") {
			t.Errorf("%s: notes %q do not say the passes ran sample by sample", p, n)
		}
	}
}

// TestDNNDiskCache: a second engine on the same cache file (the next run)
// times nothing: every choice comes from the file.
func TestDNNDiskCache(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sub", "cudnn.json")
	o := dnn.Options{CacheFile: file, GPU: "emulated GPU"}
	dev, f, e := dnnDevice(dnn.TF32, o)
	devcheck.Ops(t, dev, devcheck.Options{Seed: 11, Only: []string{"Conv3D"}})
	found, _ := e.Counts()
	if found == 0 {
		t.Fatal("nothing was timed")
	}
	if err := e.Save(); err != nil {
		t.Fatal(err)
	}
	dev2, f2, e2 := dnnDevice(dnn.TF32, o)
	devcheck.Ops(t, dev2, devcheck.Options{Seed: 11, Only: []string{"Conv3D"}})
	if n := f2.finds[dnn.Forward] + f2.finds[dnn.BackwardData] + f2.finds[dnn.BackwardFilter]; n != 0 {
		t.Errorf("the second run timed %d problems again", n)
	}
	if found2, reloaded := e2.Counts(); found2 != 0 || reloaded != found {
		t.Errorf("second run: %d found, %d reloaded; want 0 and %d", found2, reloaded, found)
	}
	if f2.runs[4] == 0 || f.runs[4] == 0 {
		t.Errorf("runs %v then %v", f.runs, f2.runs)
	}
	// Another GPU model does not take this one's choices.
	o.GPU = "another GPU"
	dev3, f3, _ := dnnDevice(dnn.TF32, o)
	devcheck.Ops(t, dev3, devcheck.Options{Seed: 11, Only: []string{"Conv3D"}})
	if f3.finds[dnn.Forward] == 0 {
		t.Error("another GPU model reused the cached choices")
	}
}

// TestUNetStepDNNUnderEmulation is TestUNetStepBF16UnderEmulation with
// every convolution through the fake cuDNN.
func TestUNetStepDNNUnderEmulation(t *testing.T) {
	if testing.Short() {
		t.Skip("slow under emulation; skipped with -short")
	}
	dev, f, _ := dnnDevice(dnn.BF16, dnn.Options{})
	devcheck.UNetStep(t, dev, emuStepCase("sgd"), devcheck.BF16)
	if dev.be.gemms != 0 || f.runs[4] == 0 {
		t.Errorf("%d GEMMs, cuDNN runs %v: the step's convolutions did not all go to cuDNN", dev.be.gemms, f.runs)
	}
}

// TestPrepareConvsKeepsTheSearchOutOfThePeak trains a step of a small
// deep-supervised U-Net in bf16 (bf16 activations and gradients, every
// convolution through the fake cuDNN) twice: first with no algorithm
// known, then with the first run's choices from the disk cache. The
// workspace's preparation (nn.ConvPreparer) times every convolution
// before the workspace is allocated, so the first run peaks exactly where
// the second does — before it, the search's workspace came on top of the
// allocated step (on the H100, nnU-Net bf16: 5832 against 4808 MiB) — and
// the step itself times nothing.
func TestPrepareConvsKeepsTheSearchOutOfThePeak(t *testing.T) {
	o := dnn.Options{CacheFile: filepath.Join(t.TempDir(), "cudnn.json"), GPU: "emulated GPU", WorkspaceLimit: 64 << 10}
	cfg := devcheck.Model([]int{4, 8, 8}, 3, true)
	run := func() (peak int64, found, inStep int, e *dnn.Engine[*emu.Buffer]) {
		dev := newEmuDevice(core.Options{BF16: true, BF16Activations: true, BF16Gradients: true, ConvWorkspace: 4 << 10,
			Name: "emulated CUDA device, fake cuDNN, bf16 activations and gradients"})
		f := newFakeDNN()
		e = dnn.New[*emu.Buffer](f, o)
		dev.UseDNN(e, dnn.BF16)
		r, err := nn.BenchStep(dev, cfg, nn.BenchOptions{Batch: 2, Patch: [3]int{8, 8, 8}, Steps: 2, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		if f.runs[4] == 0 {
			t.Fatalf("cuDNN ran %v: the convolutions did not go to cuDNN", f.runs)
		}
		found, _ = e.Counts()
		return r.PeakAllocated, found, f.findsAfterRun, e
	}
	peak1, found1, inStep, e1 := run()
	if found1 == 0 {
		t.Fatal("the first run timed nothing")
	}
	if inStep != 0 {
		t.Errorf("%d of the first run's %d searches came after a convolution had run: inside the step, not before it", inStep, found1)
	}
	if err := e1.Save(); err != nil {
		t.Fatal(err)
	}
	peak2, found2, _, _ := run()
	if found2 != 0 {
		t.Errorf("the run with the disk cache timed %d problems", found2)
	}
	if peak1 != peak2 {
		t.Errorf("the run that timed cuDNN's algorithms peaked at %d bytes, the one with them cached at %d: the search added %d bytes to the step's peak",
			peak1, peak2, peak1-peak2)
	}
}

// TestPrepareConvsWithoutMemory checks that a preparation without memory
// for its scratch is no error and decides nothing — the step times the
// pass at first use, as without preparation — that with memory it times
// the pass once, and a pass cuDNN refuses whole sample by sample.
func TestPrepareConvsWithoutMemory(t *testing.T) {
	dev, f, e := dnnDevice(dnn.BF16, dnn.Options{WorkspaceLimit: 64 << 10})
	g := geom.Conv{N: 2, InD: 8, InH: 8, InW: 8, InC: 4, OutC: 8, KD: 3, KH: 3, KW: 3, SD: 1, SH: 1, SW: 1, PD: 1, PH: 1, PW: 1}
	passes := []nn.ConvPass{{Kind: nn.ConvForward, Geom: g}, {Kind: nn.ConvBackwardWeight, Geom: g}}
	dev.be.failMalloc = func(int) bool { return true }
	if err := dev.PrepareConvs(passes); err != nil {
		t.Fatalf("without memory: %v, want no error", err)
	}
	dev.be.failMalloc = nil
	if err := dev.Err(); err != nil {
		t.Fatalf("the device's error after a preparation without memory: %v", err)
	}
	if found, _ := e.Counts(); found != 0 || f.finds[dnn.Forward] != 0 {
		t.Fatalf("without memory %d problems were decided (%v timed)", found, f.finds)
	}
	if err := dev.PrepareConvs(passes); err != nil {
		t.Fatal(err)
	}
	if found, _ := e.Counts(); found != 2 || f.finds[dnn.Forward] != 1 || f.finds[dnn.BackwardFilter] != 1 {
		t.Errorf("with memory %d problems decided, %v timed; want the 2 passes, once each", found, f.finds)
	}
	if err := dev.PrepareConvs(passes); err != nil || f.finds[dnn.Forward] != 1 {
		t.Errorf("a second preparation: %v, %v timed; want nothing timed again", err, f.finds)
	}

	// A problem cuDNN refuses for the whole batch is prepared sample by
	// sample, as the step would run it, and then known both ways.
	dev, f, e = dnnDevice(dnn.BF16, dnn.Options{WorkspaceLimit: 64 << 10})
	f.unsupported = func(p *dnn.Problem) bool { return p.X.Dims[0] > 1 }
	if err := dev.PrepareConvs(passes[:1]); err != nil {
		t.Fatal(err)
	}
	if found, _ := e.Counts(); found != 2 || f.finds[dnn.Forward] != 2 {
		t.Errorf("refused whole: %d problems decided, %v timed; want the batch's and one sample's", found, f.finds)
	}
	if n := strings.Join(e.Notes(), "\n"); !strings.Contains(n, "cuDNN, one sample at a time") {
		t.Errorf("notes %q do not say the pass runs sample by sample", n)
	}
	if err := dev.PrepareConvs(passes[:1]); err != nil || f.finds[dnn.Forward] != 2 {
		t.Errorf("a second preparation: %v, %v timed; want nothing timed again", err, f.finds)
	}
}
