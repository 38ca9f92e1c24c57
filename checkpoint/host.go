package checkpoint

import "github.com/voxtrain/voxtrain/nn"

// FromHost converts host tensors (PyTorch layout, as nn.ExportParams and
// an optimiser's State give them) for a Checkpoint, sharing their data.
func FromHost(ts []nn.HostTensor) []Tensor {
	out := make([]Tensor, len(ts))
	for i, t := range ts {
		out[i] = Tensor{Name: t.Name, Shape: []int(t.Shape), Data: t.Data}
	}
	return out
}

// ToHost is FromHost's inverse (sharing the data).
func ToHost(ts []Tensor) []nn.HostTensor {
	out := make([]nn.HostTensor, len(ts))
	for i, t := range ts {
		out[i] = nn.HostTensor{Name: t.Name, Shape: nn.Shape(t.Shape), Data: t.Data}
	}
	return out
}
