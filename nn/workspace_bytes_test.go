package nn_test

import (
	"testing"

	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/nn"
)

// countingDevice is the CPU device counting the bytes Alloc hands out.
type countingDevice struct {
	*cpu.Device
	bytes int64
}

func (d *countingDevice) Alloc(s nn.Shape) nn.Tensor {
	d.bytes += 4 * int64(s.Len())
	return d.Device.Alloc(s)
}

// TestWorkspaceBytesIsWhatNewWorkspaceAllocates: the estimate that lets
// the trainer refuse a patch the machine cannot hold is exactly what
// NewWorkspace then allocates, for training and inference, with and
// without deep supervision and several input channels.
func TestWorkspaceBytesIsWhatNewWorkspaceAllocates(t *testing.T) {
	for _, tc := range []struct {
		in, batch int
		deep      bool
		train     bool
	}{{1, 2, false, true}, {3, 1, true, true}, {2, 2, true, false}} {
		dev := &countingDevice{Device: cpu.New(cpu.Options{})}
		cfg := model([]int{2, 4, 8}, nil)
		cfg.InChannels, cfg.DeepSupervision = tc.in, tc.deep
		m, err := nn.NewUNet(dev, cfg, 0)
		if err != nil {
			t.Fatal(err)
		}
		size := [3]int{8, 12, 16}
		want, err := m.WorkspaceBytes(tc.batch, size, tc.train)
		if err != nil {
			t.Fatal(err)
		}
		before := dev.bytes
		ws, err := m.NewWorkspace(tc.batch, size, tc.train)
		if err != nil {
			t.Fatal(err)
		}
		if got := dev.bytes - before; got != want || want == 0 {
			t.Errorf("%+v: NewWorkspace allocated %d bytes, WorkspaceBytes said %d", tc, got, want)
		}
		ws.Free()
		m.Free()
	}
	m, _ := nn.NewUNet(newDev(), model([]int{2, 4}, nil), 0)
	if _, err := m.WorkspaceBytes(1, [3]int{8, 8, 7}, true); err == nil {
		t.Error("an odd patch for a stride-2 level: no error")
	}
}
