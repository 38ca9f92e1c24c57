package dnn

import "fmt"

// Kind is one of a convolution's three passes.
type Kind int

const (
	// Forward computes y from x and w (cudnnConvolutionForward).
	Forward Kind = iota
	// BackwardData computes dx from dy and w
	// (cudnnConvolutionBackwardData); a transposed convolution's forward.
	BackwardData
	// BackwardFilter computes dw from x and dy
	// (cudnnConvolutionBackwardFilter).
	BackwardFilter
)

func (k Kind) String() string {
	switch k {
	case Forward:
		return "forward"
	case BackwardData:
		return "backward-data"
	case BackwardFilter:
		return "backward-filter"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Perf is one entry of cudnnFind*AlgorithmEx's results
// (cudnnConvolution*AlgoPerf_t).
type Perf struct {
	Algo          int32
	Status        int32   // cudnnStatus_t: 0 when the algorithm ran
	TimeMs        float32 // as cuDNN timed it
	Memory        int64   // workspace bytes the algorithm needs
	Deterministic bool    // CUDNN_DETERMINISTIC
	// Math is the math type the algorithm ran with, which may differ
	// from the descriptor's (a bf16 problem timed without tensor cores,
	// say); the pass must then run with it, or cuDNN refuses
	// (CUDNN_STATUS_BAD_PARAM).
	Math MathType
}

// Lib is the part of cuDNN the Engine uses. Every pass takes its three
// tensors in the same places whatever it reads and writes: x (dx for
// BackwardData), w (dw for BackwardFilter), y (dy for the backward
// passes), with the descriptors of Problem. The implementation runs them
// on the device's compute stream, in issue order with the device's other
// work.
type Lib[B any] interface {
	// Version is cuDNN's version ("9.1.0"), part of the disk cache's key.
	Version() string
	// Find times the algorithms of kind k for p on the given buffers
	// (cudnnFind*AlgorithmEx), fastest first; the pass's output buffer is
	// overwritten. ws holds wsBytes of workspace.
	Find(k Kind, p *Problem, x, w, y, ws B, wsBytes int) ([]Perf, error)
	// WorkspaceSize returns the workspace algorithm algo needs with math
	// type m (cudnnGet*WorkspaceSize).
	WorkspaceSize(k Kind, p *Problem, algo int32, m MathType) (int, error)
	// Run computes pass k of p with algo and math type m using wsBytes
	// of workspace at ws: output = result + beta·output (alpha 1; beta
	// 0 overwrites the output, 1 accumulates into it).
	Run(k Kind, p *Problem, algo int32, m MathType, beta float32, x, w, y, ws B, wsBytes int) error
}
