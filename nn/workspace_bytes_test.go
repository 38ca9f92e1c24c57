package nn_test

import (
	"testing"

	"github.com/voxtrain/voxtrain/config"
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
		residual  bool
	}{{1, 2, false, true, false}, {3, 1, true, true, false}, {2, 2, true, false, false},
		{1, 2, true, true, true}, {2, 1, false, false, true}} {
		dev := &countingDevice{Device: cpu.New(cpu.Options{})}
		cfg := model([]int{2, 4, 8}, nil)
		cfg.InChannels, cfg.DeepSupervision = tc.in, tc.deep
		if tc.residual {
			// A pooled projection (level 1), a projection without pooling
			// (level 2 at stride 1): every scratch the blocks allocate.
			cfg.Encoder, cfg.BlocksPerLevel, cfg.DecoderConvs = config.EncoderResidual, []int{1, 2, 1}, 1
			cfg.Strides = [][3]int{{1, 1, 1}, {2, 2, 2}, {1, 1, 1}}
		}
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
		// Free gives every byte back: no tensor of the workspace is left
		// out (a residual block's scratch included).
		if cur, _ := dev.MemoryInUse(); cur != 0 {
			t.Errorf("%+v: %d bytes in use after the workspace and the model are freed", tc, cur)
		}
	}
	m, _ := nn.NewUNet(newDev(), model([]int{2, 4}, nil), 0)
	if _, err := m.WorkspaceBytes(1, [3]int{8, 8, 7}, true); err == nil {
		t.Error("an odd patch for a stride-2 level: no error")
	}
}

// TestWorkspaceSharesWhatNeverLivesTogether: a training workspace is an
// inference workspace (which normalises conv outputs in place) plus, per
// level, the conv outputs the norms' backward needs and two gradient
// buffers — and nothing else: the transposed convs' outputs live in the
// gradient buffers, each concat's gradient in the concat, the skip
// gradients in the spare buffers (the gradient checks hold the result to
// finite differences).
//
// The same holds on a device whose activations and activation gradients
// are both narrower (2 bytes, as bf16), at half the bytes; and the
// sharings are off where only the activations are narrow.
func TestWorkspaceSharesWhatNeverLivesTogether(t *testing.T) {
	for _, tc := range []struct {
		deep                bool
		actBytes, gradBytes int
	}{{false, 4, 4}, {true, 4, 4}, {false, 2, 2}, {true, 2, 2}} {
		deep := tc.deep
		cfg := model([]int{4, 8, 16}, nil)
		cfg.DeepSupervision = deep
		m, err := nn.NewUNet(newGradDevice(tc.actBytes, tc.gradBytes), cfg, 0)
		if err != nil {
			t.Fatal(err)
		}
		const n = 2
		size := [3]int{16, 16, 8}
		sizes, err := m.LevelSizes(size)
		if err != nil {
			t.Fatal(err)
		}
		train, err := m.WorkspaceBytes(n, size, true)
		if err != nil {
			t.Fatal(err)
		}
		infer, err := m.WorkspaceBytes(n, size, false)
		if err != nil {
			t.Fatal(err)
		}
		var want int64
		L := len(cfg.Features)
		for l, f := range cfg.Features {
			unit := int64(tc.actBytes * n * sizes[l][0] * sizes[l][1] * sizes[l][2] * f)
			blocks := cfg.ConvsPerLevel // the encoder's
			if l < L-1 {
				blocks += cfg.ConvsPerLevel // the decoder stage's
				want -= unit                // its transposed conv's output
			}
			want += int64(blocks)*unit + 2*unit
		}
		if got := train - infer; got != want {
			t.Errorf("%+v: training needs %d bytes more than inference, want %d (conv outputs and two gradient buffers per level)", tc, got, want)
		}
	}
}

// TestWorkspaceBytesNNUNet pins the workspace of nnU-Net's 3d_fullres
// network (32…320 features, six levels, deep supervision) for a batch of
// 2×1×128³, the figures docs/GPU.md quotes against PyTorch: float32
// (8212.6 MiB training, 4805.7 inference); bf16 activations with float32
// gradients, which cannot share memory with them (6509.1, 2421.2); bf16
// activations and gradients, sharing again (4124.6, 2421.2).
func TestWorkspaceBytesNNUNet(t *testing.T) {
	cfg := model([]int{32, 64, 128, 256, 320, 320}, func(m *config.Model) {
		m.NumClasses, m.DeepSupervision = 2, true
	})
	for _, tc := range []struct {
		actBytes, gradBytes int
		train, infer        int64
	}{
		{4, 4, 8611500032, 5039132672},
		{2, 4, 6825316352, 2538770432},
		{2, 2, 4324954112, 2538770432},
	} {
		m, err := nn.NewUNet(newGradDevice(tc.actBytes, tc.gradBytes), cfg, 0)
		if err != nil {
			t.Fatal(err)
		}
		size := [3]int{128, 128, 128}
		train, err := m.WorkspaceBytes(2, size, true)
		if err != nil {
			t.Fatal(err)
		}
		infer, err := m.WorkspaceBytes(2, size, false)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("activations %d bytes, gradients %d: training %.1f MiB, inference %.1f MiB", tc.actBytes, tc.gradBytes, mib(train), mib(infer))
		if train != tc.train || infer != tc.infer {
			t.Errorf("activations %d bytes, gradients %d: workspace %d bytes (%.1f MiB) training, %d (%.1f MiB) inference; want %d and %d",
				tc.actBytes, tc.gradBytes, train, mib(train), infer, mib(infer), tc.train, tc.infer)
		}
		m.Free()
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
