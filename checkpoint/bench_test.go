package checkpoint

import (
	"fmt"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/nn"
)

// benchCheckpoint is a 3D U-Net-sized save: 4M float32 weights (16 MB)
// and Adam's two moments (32 MB).
func benchCheckpoint() (*Checkpoint, []nn.HostTensor, []nn.HostTensor) {
	const layers, per = 16, 1 << 18
	var model, opt []nn.HostTensor
	for i := range layers {
		shape := []int{64, 64, 4, 4, 4} // per elements
		w := make([]float32, per)
		for j := range w {
			w[j] = float32(j%1000) * 1e-3
		}
		name := fmt.Sprintf("encoder.stages.%d.conv.weight", i)
		model = append(model, nn.HostTensor{Name: name, Shape: shape, Data: w})
		opt = append(opt,
			nn.HostTensor{Name: name + ".exp_avg", Shape: shape, Data: make([]float32, per)},
			nn.HostTensor{Name: name + ".exp_avg_sq", Shape: shape, Data: make([]float32, per)})
	}
	return &Checkpoint{Epoch: 1, Step: 1, Model: model, Optimizer: opt, State: map[string]int{"step": 1}}, model, opt
}

// BenchmarkSave measures a whole atomic save (write, CRC, fsyncs, rename,
// pointer, prune) of a 48 MB checkpoint.
func BenchmarkSave(b *testing.B) {
	c, _, _ := benchCheckpoint()
	s := &Saver{Dir: b.TempDir(), Policy: config.Checkpoint{KeepRecent: 1}}
	b.SetBytes(48 << 20)
	for i := 0; b.Loop(); i++ {
		c.Step = int64(i)
		if _, err := s.Save(c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoadLatest measures finding, verifying (CRC) and loading the
// same checkpoint into existing buffers.
func BenchmarkLoadLatest(b *testing.B) {
	c, model, opt := benchCheckpoint()
	s := &Saver{Dir: b.TempDir(), Policy: config.Checkpoint{KeepRecent: 2}}
	if _, err := s.Save(c); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(48 << 20)
	for b.Loop() {
		if _, err := LoadLatest(s.Dir, model, opt); err != nil {
			b.Fatal(err)
		}
	}
}
