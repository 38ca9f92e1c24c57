package infer

import (
	"fmt"

	"github.com/voxtrain/voxtrain/nn"
)

// DeviceNet runs a U-Net's forward pass on its device as a Network for
// sliding-window inference: host NCDHW patches in, host NCDHW logits out,
// through an inference workspace of a fixed batch size (short batches are
// padded).
type DeviceNet struct {
	dev      nn.Device
	m        *nn.UNet
	ws       *nn.Workspace
	x, out   nn.Tensor // device input (NDHWC) and logits (NCDHW)
	hostIn   []float32 // a full batch of input patches
	hostOut  []float32 // a full batch of logits
	batch    int
	inC      int
	outC     int
	patchVox int // voxels of one patch
	patch    [3]int
}

// NewDeviceNet makes a DeviceNet for m taking batches of batch patches of
// size patch (D, H, W). Free releases its device memory.
func NewDeviceNet(m *nn.UNet, batch int, patch [3]int) (*DeviceNet, error) {
	ws, err := m.NewWorkspace(batch, patch, false)
	if err != nil {
		return nil, fmt.Errorf("inference workspace: %w", err)
	}
	dev := m.Device()
	cfg := m.Config()
	p := &DeviceNet{dev: dev, m: m, ws: ws, batch: batch, inC: cfg.InChannels, outC: cfg.NumClasses,
		patchVox: patch[0] * patch[1] * patch[2], patch: patch}
	p.x = dev.Alloc(ws.InputShape())
	p.out = dev.Alloc(nn.Shape{batch, p.outC, patch[0], patch[1], patch[2]})
	p.hostIn = make([]float32, batch*p.inC*p.patchVox)
	p.hostOut = make([]float32, batch*p.outC*p.patchVox)
	return p, nil
}

// Forward implements Network.
func (p *DeviceNet) Forward(n int, in, out []float32) error {
	if n > p.batch {
		return fmt.Errorf("infer: %d patches for a batch of %d", n, p.batch)
	}
	copy(p.hostIn, in)
	clear(p.hostIn[len(in):])
	s := p.dev.ComputeStream()
	if err := p.dev.Upload(s, p.x, p.hostIn); err != nil {
		return err
	}
	logits := p.m.Forward(p.ws, p.x)[0] // (N, D, H, W, K)
	p.dev.NDHWCToNCDHW(logits, p.out)
	if err := p.dev.Download(s, p.hostOut, p.out); err != nil {
		return err
	}
	s.Synchronize()
	if err := p.dev.Err(); err != nil {
		return err
	}
	copy(out, p.hostOut[:n*p.outC*p.patchVox])
	return nil
}

// Free releases the device memory.
func (p *DeviceNet) Free() {
	p.dev.ComputeStream().Synchronize()
	p.dev.Free(p.x)
	p.dev.Free(p.out)
	p.ws.Free()
}
