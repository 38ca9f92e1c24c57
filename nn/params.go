package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// ParamKind says how a parameter's device layout relates to PyTorch's.
type ParamKind int

const (
	// Vector is a bias or a norm's affine parameter: (C) on both sides.
	Vector ParamKind = iota
	// ConvWeight is a Conv3d weight: PyTorch (O, I, kD, kH, kW), device
	// (O, kD, kH, kW, I).
	ConvWeight
	// ConvTransposeWeight is a ConvTranspose3d weight: PyTorch
	// (I, O, kD, kH, kW), device (I, kD, kH, kW, O).
	ConvTransposeWeight
)

// Param is one learnable tensor with its gradient.
type Param struct {
	// Name is the PyTorch state_dict key, e.g. "enc.0.0.0.weight".
	Name string
	Kind ParamKind
	// TorchShape is the shape in PyTorch's layout.
	TorchShape Shape
	// W and G hold the value and the gradient in device layout.
	W, G Tensor

	initOne bool // a norm weight: initialised to 1
}

// DeviceShape returns the parameter's shape in device layout.
func (p *Param) DeviceShape() Shape { return deviceShape(p.Kind, p.TorchShape) }

func deviceShape(k ParamKind, s Shape) Shape {
	if k == Vector {
		return s.Clone()
	}
	// Both weight kinds move PyTorch's axis 1 last.
	return Shape{s[0], s[2], s[3], s[4], s[1]}
}

// moveAxis1Last permutes a 5-D (a, b, c, d, e) array to (a, c, d, e, b).
func moveAxis1Last(s Shape, src []float32) []float32 {
	a, b, inner := s[0], s[1], s[2]*s[3]*s[4]
	dst := make([]float32, len(src))
	for i := 0; i < a; i++ {
		for j := 0; j < b; j++ {
			for k := 0; k < inner; k++ {
				dst[(i*inner+k)*b+j] = src[(i*b+j)*inner+k]
			}
		}
	}
	return dst
}

// moveLastToAxis1 is moveAxis1Last's inverse; s is the PyTorch shape.
func moveLastToAxis1(s Shape, src []float32) []float32 {
	a, b, inner := s[0], s[1], s[2]*s[3]*s[4]
	dst := make([]float32, len(src))
	for i := 0; i < a; i++ {
		for j := 0; j < b; j++ {
			for k := 0; k < inner; k++ {
				dst[(i*b+j)*inner+k] = src[(i*inner+k)*b+j]
			}
		}
	}
	return dst
}

// ToTorch converts data of a tensor of kind k from device layout to
// PyTorch layout; torchShape is the PyTorch shape.
func ToTorch(k ParamKind, torchShape Shape, data []float32) []float32 {
	if k == Vector {
		return append([]float32(nil), data...)
	}
	return moveLastToAxis1(torchShape, data)
}

// FromTorch converts data in PyTorch layout to device layout.
func FromTorch(k ParamKind, torchShape Shape, data []float32) []float32 {
	if k == Vector {
		return append([]float32(nil), data...)
	}
	return moveAxis1Last(torchShape, data)
}

// HostTensor is a named tensor in host memory in PyTorch layout, the unit of
// checkpoints (safetensors) and fixtures.
type HostTensor struct {
	Name  string
	Shape Shape
	Data  []float32
}

// downloadSync copies t to a new host slice and waits for it.
func downloadSync(dev Device, t Tensor) ([]float32, error) {
	out := make([]float32, t.Shape().Len())
	s := dev.ComputeStream()
	if err := dev.Download(s, out, t); err != nil {
		return nil, err
	}
	s.Synchronize()
	return out, dev.Err()
}

// uploadSync copies host data into t and waits for it.
func uploadSync(dev Device, t Tensor, data []float32) error {
	s := dev.ComputeStream()
	if err := dev.Upload(s, t, data); err != nil {
		return err
	}
	s.Synchronize()
	return dev.Err()
}

// ExportTensors returns, in order and in PyTorch layout, the tensors
// tensor(p) of each parameter under the name name(p): the weights, the
// gradients, or an optimiser's state.
func ExportTensors(dev Device, params []*Param, name func(*Param) string, tensor func(*Param) Tensor) ([]HostTensor, error) {
	out := make([]HostTensor, 0, len(params))
	for _, p := range params {
		t := tensor(p)
		d, err := downloadSync(dev, t)
		if err != nil {
			return nil, fmt.Errorf("export %s: %w", name(p), err)
		}
		out = append(out, HostTensor{Name: name(p), Shape: p.TorchShape.Clone(), Data: ToTorch(p.Kind, p.TorchShape, d)})
	}
	return out, nil
}

// ImportTensors is ExportTensors' inverse: it finds each parameter's tensor
// by name in ts and uploads it into tensor(p). A missing or surplus name or
// a shape mismatch is an error naming it.
func ImportTensors(dev Device, params []*Param, ts []HostTensor, name func(*Param) string, tensor func(*Param) Tensor) error {
	byName := make(map[string]HostTensor, len(ts))
	for _, t := range ts {
		if _, dup := byName[t.Name]; dup {
			return fmt.Errorf("import: tensor %q given twice", t.Name)
		}
		byName[t.Name] = t
	}
	for _, p := range params {
		n := name(p)
		t, ok := byName[n]
		if !ok {
			return fmt.Errorf("import: missing tensor %q", n)
		}
		delete(byName, n)
		if !t.Shape.Equal(p.TorchShape) {
			return fmt.Errorf("import %s: shape %v, model has %v", n, t.Shape, p.TorchShape)
		}
		if len(t.Data) != p.TorchShape.Len() {
			return fmt.Errorf("import %s: %d values for shape %v", n, len(t.Data), t.Shape)
		}
		if err := uploadSync(dev, tensor(p), FromTorch(p.Kind, p.TorchShape, t.Data)); err != nil {
			return fmt.Errorf("import %s: %w", n, err)
		}
	}
	for n := range byName {
		return fmt.Errorf("import: unexpected tensor %q (not a parameter of this model)", n)
	}
	return nil
}

// ExportParams returns the parameters' values in PyTorch layout, named by
// their state_dict keys in state_dict order.
func ExportParams(dev Device, params []*Param) ([]HostTensor, error) {
	return ExportTensors(dev, params, func(p *Param) string { return p.Name }, func(p *Param) Tensor { return p.W })
}

// ImportParams loads parameter values given in PyTorch layout by name.
func ImportParams(dev Device, params []*Param, ts []HostTensor) error {
	return ImportTensors(dev, params, ts, func(p *Param) string { return p.Name }, func(p *Param) Tensor { return p.W })
}

// ExportGrads returns the parameters' gradients in PyTorch layout.
func ExportGrads(dev Device, params []*Param) ([]HostTensor, error) {
	return ExportTensors(dev, params, func(p *Param) string { return p.Name }, func(p *Param) Tensor { return p.G })
}

// initHe fills the parameters like nnU-Net's InitWeights_He(1e-2): conv and
// transposed-conv weights from kaiming_normal_(a=negSlope) (fan_in from
// PyTorch's shape, so a transposed conv's fan_in is its out_channels·k³, as
// PyTorch computes it), biases 0, norm weights 1. Values are drawn in
// parameter order from rng in PyTorch layout.
func initHe(dev Device, params []*Param, negSlope float64, rng *rand.Rand) error {
	for _, p := range params {
		data := make([]float32, p.TorchShape.Len())
		switch {
		case p.Kind != Vector:
			fanIn := p.TorchShape[1] * p.TorchShape[2] * p.TorchShape[3] * p.TorchShape[4]
			std := math.Sqrt(2/(1+negSlope*negSlope)) / math.Sqrt(float64(fanIn))
			for i := range data {
				data[i] = float32(rng.NormFloat64() * std)
			}
		case p.initOne:
			for i := range data {
				data[i] = 1
			}
		}
		if err := uploadSync(dev, p.W, FromTorch(p.Kind, p.TorchShape, data)); err != nil {
			return fmt.Errorf("init %s: %w", p.Name, err)
		}
	}
	return nil
}
