package trainer

import (
	"fmt"

	"github.com/voxtrain/voxtrain/nn"
)

// predictor runs a U-Net forward pass for sliding-window inference
// (infer.Model): host NCDHW patches in, host NCDHW logits out, through an
// inference workspace of a fixed batch size (short batches are padded).
type predictor struct {
	dev     nn.Device
	m       *nn.UNet
	ws      *nn.Workspace
	x, out  nn.Tensor
	in, res []float32
	batch   int
	inC     int
	outC    int
	pv      int
}

func newPredictor(m *nn.UNet, batch int, patch [3]int) (*predictor, error) {
	ws, err := m.NewWorkspace(batch, patch, false)
	if err != nil {
		return nil, fmt.Errorf("inference workspace: %w", err)
	}
	dev := m.Device()
	cfg := m.Config()
	p := &predictor{dev: dev, m: m, ws: ws, batch: batch, inC: cfg.InChannels, outC: cfg.NumClasses,
		pv: patch[0] * patch[1] * patch[2]}
	p.x = dev.Alloc(ws.InputShape())
	p.out = dev.Alloc(nn.Shape{batch, p.outC, patch[0], patch[1], patch[2]})
	p.in = make([]float32, batch*p.inC*p.pv)
	p.res = make([]float32, batch*p.outC*p.pv)
	return p, nil
}

// Forward implements infer.Model.
func (p *predictor) Forward(n int, in, out []float32) error {
	if n > p.batch {
		return fmt.Errorf("predictor: %d patches for a batch of %d", n, p.batch)
	}
	copy(p.in, in)
	clear(p.in[len(in):])
	s := p.dev.ComputeStream()
	if err := p.dev.Upload(s, p.x, p.in); err != nil {
		return err
	}
	logits := p.m.Forward(p.ws, p.x)[0] // (N, D, H, W, K)
	p.dev.NDHWCToNCDHW(logits, p.out)
	if err := p.dev.Download(s, p.res, p.out); err != nil {
		return err
	}
	s.Synchronize()
	if err := p.dev.Err(); err != nil {
		return err
	}
	copy(out, p.res[:n*p.outC*p.pv])
	return nil
}

func (p *predictor) free() {
	p.dev.ComputeStream().Synchronize()
	p.dev.Free(p.x)
	p.dev.Free(p.out)
	p.ws.Free()
}
