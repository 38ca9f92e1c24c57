package nn_test

import (
	"testing"

	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/nn"
)

// actDevice is the CPU device posing as one that stores activations in
// a narrower type (nn.ActivationAllocator): AllocActivation hands out the
// CPU's float32 tensors but counts elemBytes per element, and records
// which tensors it made.
type actDevice struct {
	*cpu.Device
	elemBytes   int
	bytes       int64 // Alloc at 4 bytes per element, AllocActivation at elemBytes
	activations map[nn.Tensor]bool
}

var _ nn.ActivationAllocator = (*actDevice)(nil)

func newActDevice(elemBytes int) *actDevice {
	return &actDevice{Device: cpu.New(cpu.Options{}), elemBytes: elemBytes, activations: map[nn.Tensor]bool{}}
}

func (d *actDevice) Alloc(s nn.Shape) nn.Tensor {
	d.bytes += 4 * int64(s.Len())
	return d.Device.Alloc(s)
}

func (d *actDevice) ActivationBytes() int { return d.elemBytes }

func (d *actDevice) AllocActivation(s nn.Shape) nn.Tensor {
	d.bytes += int64(d.elemBytes) * int64(s.Len())
	t := d.Device.Alloc(s)
	d.activations[t] = true
	return t
}

// TestWorkspaceAllocatesActivationsThroughTheDevice: on a device with
// narrower activations the workspace allocates every block output, conv
// output (training), transposed-conv output and concat through
// AllocActivation and nothing else; WorkspaceBytes counts them at the
// device's element size and is what NewWorkspace allocates; a device
// whose activations are float32 (ActivationBytes 4) is not asked.
func TestWorkspaceAllocatesActivationsThroughTheDevice(t *testing.T) {
	for _, tc := range []struct {
		in    int
		deep  bool
		train bool
	}{{1, false, true}, {2, true, true}, {1, true, false}} {
		cfg := model([]int{2, 4, 8}, nil)
		cfg.InChannels, cfg.DeepSupervision = tc.in, tc.deep
		L, convs := len(cfg.Features), cfg.ConvsPerLevel
		perBlock := 1 // output (inference normalises the conv output in place)
		if tc.train {
			perBlock = 2 // and the conv output the norm's backward reads
		}
		want := (L+L-1)*convs*perBlock + 2*(L-1) // blocks, then up and cat per stage
		size := [3]int{8, 12, 16}
		const batch = 2

		dev := newActDevice(2)
		m, err := nn.NewUNet(dev, cfg, 0)
		if err != nil {
			t.Fatal(err)
		}
		est, err := m.WorkspaceBytes(batch, size, tc.train)
		if err != nil {
			t.Fatal(err)
		}
		before := dev.bytes
		ws, err := m.NewWorkspace(batch, size, tc.train)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(dev.activations); got != want {
			t.Errorf("%+v: %d tensors from AllocActivation, want %d", tc, got, want)
		}
		for _, o := range ws.Outputs() {
			if dev.activations[o] {
				t.Errorf("%+v: logits %v allocated as an activation (they stay float32)", tc, o.Shape())
			}
		}
		if got := dev.bytes - before; got != est {
			t.Errorf("%+v: NewWorkspace allocated %d bytes, WorkspaceBytes said %d", tc, got, est)
		}
		ws.Free()

		wide := newActDevice(4)
		mw, err := nn.NewUNet(wide, cfg, 0)
		if err != nil {
			t.Fatal(err)
		}
		full, err := mw.WorkspaceBytes(batch, size, tc.train)
		if err != nil {
			t.Fatal(err)
		}
		wsw, err := mw.NewWorkspace(batch, size, tc.train)
		if err != nil {
			t.Fatal(err)
		}
		if len(wide.activations) != 0 {
			t.Errorf("%+v: %d tensors from AllocActivation of a device with float32 activations", tc, len(wide.activations))
		}
		if !(est < full) {
			t.Errorf("%+v: workspace with 2-byte activations %d bytes, with float32 ones %d: no saving", tc, est, full)
		}
		t.Logf("%+v: workspace %d bytes with 2-byte activations, %d with float32", tc, est, full)
		wsw.Free()
	}
}

// TestNarrowActivationWorkspaceTrainsAsTheCPU: the workspace of a device
// with narrower activations gives the transposed convs' outputs and the
// concats' gradients memory of their own (they cannot share float32
// gradient buffers); trained on the CPU's float32 tensors it must give
// the CPU's weights bit for bit.
func TestNarrowActivationWorkspaceTrainsAsTheCPU(t *testing.T) {
	sgd := optim("sgd", nil)
	want, _ := trainSteps(t, newDev(), sgd, 2)
	got, _ := trainSteps(t, newActDevice(2), sgd, 2)
	for i := range want {
		for j := range want[i].Data {
			if got[i].Data[j] != want[i].Data[j] {
				t.Fatalf("%s[%d] = %v with the narrow-activation workspace, %v without", want[i].Name, j, got[i].Data[j], want[i].Data[j])
			}
		}
	}
}

// gradDevice is actDevice posing as one that stores activation gradients
// in gradBytes per element too (nn.ActivationGradientAllocator), recording
// which tensors it made.
type gradDevice struct {
	*actDevice
	gradBytes int
	grads     map[nn.Tensor]bool
}

var _ nn.ActivationGradientAllocator = (*gradDevice)(nil)

func newGradDevice(actBytes, gradBytes int) *gradDevice {
	return &gradDevice{actDevice: newActDevice(actBytes), gradBytes: gradBytes, grads: map[nn.Tensor]bool{}}
}

func (d *gradDevice) ActivationGradientBytes() int { return d.gradBytes }

func (d *gradDevice) AllocActivationGradient(s nn.Shape) nn.Tensor {
	d.bytes += int64(d.gradBytes) * int64(s.Len())
	t := d.Device.Alloc(s)
	d.grads[t] = true
	return t
}

// TestWorkspaceAllocatesGradientsThroughTheDevice: on a device whose
// activation gradients are narrower, the workspace allocates the two
// gradient buffers per level through AllocActivationGradient, and the
// concats' gradients too where they cannot share the concats (activations
// of another width); with activations and gradients of one width the
// transposed convs' outputs and the concats' gradients live in gradient
// buffers and concats again. Logits stay float32; inference asks for no
// gradient; WorkspaceBytes is what NewWorkspace allocates.
func TestWorkspaceAllocatesGradientsThroughTheDevice(t *testing.T) {
	for _, tc := range []struct {
		actBytes, gradBytes int
		deep, train         bool
	}{{2, 2, false, true}, {2, 2, true, true}, {4, 2, true, true}, {2, 2, true, false}} {
		cfg := model([]int{2, 4, 8}, nil)
		cfg.DeepSupervision = tc.deep
		L, convs := len(cfg.Features), cfg.ConvsPerLevel
		share := tc.actBytes == tc.gradBytes
		wantGrads, wantActs := 0, (L+L-1)*convs+2*(L-1) // inference: block outputs, up and cat per stage
		if tc.train {
			wantGrads = 2 * L // actGrad, actGradSpare
			wantActs += (L + L - 1) * convs
			if share {
				wantActs -= L - 1 // the ups live in actGrad
			} else {
				wantGrads += L - 1 // the concats' gradients
			}
		}
		if tc.actBytes == 4 {
			wantActs = 0 // float32 activations come from Alloc
		}
		dev := newGradDevice(tc.actBytes, tc.gradBytes)
		m, err := nn.NewUNet(dev, cfg, 0)
		if err != nil {
			t.Fatal(err)
		}
		size := [3]int{8, 12, 16}
		est, err := m.WorkspaceBytes(2, size, tc.train)
		if err != nil {
			t.Fatal(err)
		}
		before := dev.bytes
		ws, err := m.NewWorkspace(2, size, tc.train)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(dev.grads); got != wantGrads {
			t.Errorf("%+v: %d tensors from AllocActivationGradient, want %d", tc, got, wantGrads)
		}
		if got := len(dev.activations); got != wantActs {
			t.Errorf("%+v: %d tensors from AllocActivation, want %d", tc, got, wantActs)
		}
		for _, o := range ws.Outputs() {
			if dev.grads[o] || dev.activations[o] {
				t.Errorf("%+v: logits %v not allocated as float32", tc, o.Shape())
			}
		}
		if got := dev.bytes - before; got != est {
			t.Errorf("%+v: NewWorkspace allocated %d bytes, WorkspaceBytes said %d", tc, got, est)
		}
		ws.Free()
		m.Free()
	}
}

// TestNarrowGradientWorkspaceTrainsAsTheCPU: the workspace of a device
// with narrower activation gradients — sharing the transposed convs'
// outputs and the concats with gradient buffers when its activations are
// as narrow, not when they are float32 — trained on the CPU's float32
// tensors gives the CPU's weights bit for bit.
func TestNarrowGradientWorkspaceTrainsAsTheCPU(t *testing.T) {
	sgd := optim("sgd", nil)
	want, _ := trainSteps(t, newDev(), sgd, 2)
	for _, b := range [][2]int{{2, 2}, {4, 2}} {
		got, _ := trainSteps(t, newGradDevice(b[0], b[1]), sgd, 2)
		for i := range want {
			for j := range want[i].Data {
				if got[i].Data[j] != want[i].Data[j] {
					t.Fatalf("activations %d bytes, gradients %d: %s[%d] = %v, %v on the CPU", b[0], b[1], want[i].Name, j, got[i].Data[j], want[i].Data[j])
				}
			}
		}
	}
}
