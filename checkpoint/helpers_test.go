package checkpoint

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/voxtrain/voxtrain/nn"
)

// testModel returns tensors shaped like a tiny 3D U-Net's state dict with
// values derived from step, so a loaded checkpoint can be checked against
// its own step.
func testModel(step int64, scale int) (model, opt []nn.HostTensor) {
	specs := []struct {
		name  string
		shape []int
	}{
		{"encoder.0.conv.weight", []int{8 * scale, 1, 3, 3, 3}},
		{"encoder.0.conv.bias", []int{8 * scale}},
		{"encoder.0.norm.weight", []int{8 * scale}},
		{"decoder.seg.weight", []int{2, 8 * scale, 1, 1, 1}},
		{"decoder.seg.bias", []int{2}},
	}
	for k, s := range specs {
		n := 1
		for _, d := range s.shape {
			n *= d
		}
		w := make([]float32, n)
		m := make([]float32, n)
		for i := range w {
			w[i] = fill(step, k, i)
			m[i] = -fill(step, k, i)
		}
		model = append(model, nn.HostTensor{Name: s.name, Shape: s.shape, Data: w})
		opt = append(opt, nn.HostTensor{Name: s.name + ".momentum_buffer", Shape: s.shape, Data: m})
	}
	return model, opt
}

func fill(step int64, k, i int) float32 {
	return float32(step%100000)*0.5 + float32(k) + float32(i%13)*0.25
}

// empty returns tensors with the names and shapes of ts and nil Data.
func empty(ts []nn.HostTensor) []nn.HostTensor {
	out := make([]nn.HostTensor, len(ts))
	for i, t := range ts {
		out[i] = nn.HostTensor{Name: t.Name, Shape: t.Shape}
	}
	return out
}

type testState struct {
	Step int64   `json:"step"`
	Sum  float64 `json:"sum"`
}

func sum(ts []nn.HostTensor) float64 {
	var s float64
	for _, t := range ts {
		for _, v := range t.Data {
			s += float64(v)
		}
	}
	return s
}

func testCheckpoint(epoch int, step int64, scale int, metric *float64) *Checkpoint {
	model, opt := testModel(step, scale)
	return &Checkpoint{
		Epoch: epoch, Step: step, Metric: metric,
		Model: model, Optimizer: opt,
		State:   testState{Step: step, Sum: sum(model)},
		Config:  fmt.Sprintf("seed: %d\n", step),
		Version: "test",
	}
}

// verify checks that a loaded checkpoint is internally consistent: the
// manifest's step, the state's step and checksum, and every tensor value.
func verify(l *Loaded, model, opt []nn.HostTensor) error {
	var st testState
	if err := json.Unmarshal(l.State, &st); err != nil {
		return fmt.Errorf("%s: state: %v", l.Dir, err)
	}
	if st.Step != l.Step {
		return fmt.Errorf("%s: state step %d, manifest step %d", l.Dir, st.Step, l.Step)
	}
	if s := sum(model); math.Abs(s-st.Sum) > 1e-9*math.Abs(s)+1e-9 {
		return fmt.Errorf("%s: model sum %v, state says %v", l.Dir, s, st.Sum)
	}
	for k, t := range model {
		for i, v := range t.Data {
			if v != fill(l.Step, k, i) {
				return fmt.Errorf("%s: %s[%d] = %v, want %v", l.Dir, t.Name, i, v, fill(l.Step, k, i))
			}
		}
	}
	for k, t := range opt {
		for i, v := range t.Data {
			if v != -fill(l.Step, k, i) {
				return fmt.Errorf("%s: %s[%d] = %v, want %v", l.Dir, t.Name, i, v, -fill(l.Step, k, i))
			}
		}
	}
	if want := fmt.Sprintf("seed: %d\n", l.Step); l.Config != want {
		return fmt.Errorf("%s: config %q, want %q", l.Dir, l.Config, want)
	}
	return nil
}

func mustSave(t *testing.T, s *Saver, c *Checkpoint) Saved {
	t.Helper()
	saved, err := s.Save(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(saved.Warnings) > 0 {
		t.Errorf("warnings: %v", saved.Warnings)
	}
	return saved
}

// mustLoadLatest loads the newest usable checkpoint in dir into fresh
// tensors and fails unless it is step want with intact values.
func mustLoadLatest(t *testing.T, dir string, want int64) *Loaded {
	t.Helper()
	model, opt := testModel(0, 1)
	l, err := LoadLatest(dir, model, opt)
	if err != nil {
		t.Fatal(err)
	}
	if l.Step != want {
		t.Fatalf("latest step %d, want %d", l.Step, want)
	}
	if err := verify(l, model, opt); err != nil {
		t.Error(err)
	}
	return l
}

func f64(v float64) *float64 { return &v }

// corrupt damages the file at path: "truncate" cuts it in half, "flip"
// flips a bit near its end.
func corrupt(t *testing.T, path string, how string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	switch how {
	case "truncate":
		b = b[:len(b)/2]
	case "flip":
		b[len(b)-3] ^= 0x40
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
