// Package python_test holds voxtrain's side of the check of the PyTorch
// loader python/voxtrain_torch.py: a run directory written here
// (testdata/run, with -update), the outputs the loader's module computes
// from it (testdata/torch_outputs.safetensors, by make_fixture.py), and a
// test that voxtrain's CPU device computes the same.
package python_test

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/voxtrain/voxtrain/checkpoint/safetensors"
	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/nn"
)

var update = flag.Bool("update", false, "rewrite testdata/run and testdata/input.safetensors (then run make_fixture.py)")

// loaderFixture is one run the loader is checked on: its directory, the
// input, PyTorch's outputs (make_fixture.py NAME) and the run's config.
type loaderFixture struct {
	name, runDir, inputFile, torchOut string
	config                            func() config.Config
}

func (fx loaderFixture) ckptDir() string { return filepath.Join(fx.runDir, "checkpoints", "best") }

var loaderFixtures = []loaderFixture{
	{"run", "testdata/run", "testdata/input.safetensors", "testdata/torch_outputs.safetensors", fixtureConfig},
	{"run_resenc", "testdata/run_resenc", "testdata/input_resenc.safetensors", "testdata/torch_outputs_resenc.safetensors", resencConfig},
}

// fixtureConfig is a small network with every option the loader maps: two
// input channels, anisotropic first kernel and stride, deep supervision,
// LeakyReLU with a non-default slope and a non-default norm epsilon.
func fixtureConfig() config.Config {
	c := config.Default()
	m := &c.Model
	m.InChannels, m.NumClasses = 2, 3
	m.Features = []int{4, 8, 8}
	m.KernelSizes = [][3]int{{1, 3, 3}, {3, 3, 3}, {3, 3, 3}}
	m.Strides = [][3]int{{1, 1, 1}, {1, 2, 2}, {2, 2, 2}}
	m.DeepSupervision = true
	m.NegativeSlope = 0.02
	m.NormEps = 1e-4
	c.Train.PatchSize = [3]int{8, 16, 16}
	c.Train.BatchSize = 2
	return c
}

// resencConfig is fixtureConfig with nnU-Net's residual encoder: a stem,
// residual blocks with every kind of skip (pooled projection at level 1,
// projection without pooling at level 2, identity), one decoder conv per
// stage.
func resencConfig() config.Config {
	c := fixtureConfig()
	m := &c.Model
	m.Features = []int{4, 8, 12}
	m.Strides = [][3]int{{1, 1, 1}, {1, 2, 2}, {1, 1, 1}}
	m.Encoder, m.BlocksPerLevel, m.DecoderConvs = config.EncoderResidual, []int{2, 1, 2}, 1
	return c
}

// writeFixture writes the run (config.yaml and a checkpoint with weights
// drawn by nn's initialisation, then perturbed so that norm scales and
// biases are not 1 and 0) and the input.
func writeFixture(t *testing.T, fx loaderFixture) {
	c := fx.config()
	dev := cpu.New(cpu.Options{Threads: 1})
	m, err := nn.NewUNet(dev, c.Model, 5)
	if err != nil {
		t.Fatal(err)
	}
	params, err := nn.ExportParams(dev, m.Params())
	if err != nil {
		t.Fatal(err)
	}
	var tensors []safetensors.Tensor
	for i, p := range params {
		for j := range p.Data {
			p.Data[j] += float32(0.05 * math.Sin(float64(7*i+j)))
		}
		tensors = append(tensors, safetensors.Float32(p.Name, p.Shape, p.Data))
	}
	text, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{fx.runDir, fx.ckptDir()} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	save(t, filepath.Join(fx.ckptDir(), "model.safetensors"), tensors)
	p := c.Train.PatchSize
	shape := []int{c.Train.BatchSize, c.Model.InChannels, p[0], p[1], p[2]}
	x := make([]float32, nn.Shape(shape).Len())
	for i := range x {
		x[i] = float32(math.Sin(0.37*float64(i)) + 0.3*math.Cos(1.3*float64(i)))
	}
	save(t, fx.inputFile, []safetensors.Tensor{safetensors.Float32("input", shape, x)})
}

func save(t *testing.T, path string, tensors []safetensors.Tensor) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := safetensors.Write(f, tensors, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestTorchLoaderMatchesCPU: the module voxtrain_torch.py builds from the
// run's config.yaml, with the run's weights loaded, computes the same
// logits (every deep-supervision output) as voxtrain's CPU device on the
// same input: the Python loader is a faithful copy of voxtrain's network.
func TestTorchLoaderMatchesCPU(t *testing.T) {
	for _, fx := range loaderFixtures {
		t.Run(fx.name, func(t *testing.T) { checkLoader(t, fx) })
	}
}

func checkLoader(t *testing.T, fx loaderFixture) {
	if *update {
		writeFixture(t, fx)
		t.Skip("fixture rewritten: run make_fixture.py, then the test again")
	}
	c := fx.config()
	dev := cpu.New(cpu.Options{Threads: 2})
	m, err := nn.NewUNet(dev, c.Model, 1)
	if err != nil {
		t.Fatal(err)
	}
	weights := testutil.ReadSafetensors(t, filepath.Join(fx.ckptDir(), "model.safetensors"))
	var ordered []nn.HostTensor
	for _, p := range m.Params() {
		w, ok := weights[p.Name]
		if !ok {
			t.Fatalf("model.safetensors lacks %s", p.Name)
		}
		ordered = append(ordered, w)
	}
	if err := nn.ImportParams(dev, m.Params(), ordered); err != nil {
		t.Fatal(err)
	}
	x := testutil.ReadSafetensors(t, fx.inputFile)["input"]
	ws, err := m.NewWorkspace(x.Shape[0], [3]int{x.Shape[2], x.Shape[3], x.Shape[4]}, false)
	if err != nil {
		t.Fatal(err)
	}
	xd := dev.Alloc(x.Shape)
	if err := dev.Upload(dev.ComputeStream(), xd, x.Data); err != nil {
		t.Fatal(err)
	}
	outs := m.Forward(ws, xd)
	want := testutil.ReadSafetensors(t, fx.torchOut)
	if len(want) != len(outs) {
		t.Fatalf("PyTorch gave %d outputs, voxtrain %d", len(want), len(outs))
	}
	for i, o := range outs {
		w := want[fmt.Sprintf("output.%d", i)]
		nc := dev.Alloc(w.Shape)
		dev.NDHWCToNCDHW(o, nc)
		got := make([]float32, w.Shape.Len())
		if err := dev.Download(dev.ComputeStream(), got, nc); err != nil {
			t.Fatal(err)
		}
		rel := testutil.RelativeL2(got, w.Data)
		if rel > 1e-5 {
			t.Errorf("output %d %v: relative L2 error %.2e against PyTorch > 1e-5", i, w.Shape, rel)
		} else {
			t.Logf("output %d %v: relative L2 error %.2e against PyTorch", i, w.Shape, rel)
		}
	}
}
