package augment

import (
	"fmt"
	"math"

	"github.com/voxtrain/voxtrain/config"
)

// Augmenter applies one validated augment section to patches of one size and channel
// count. It holds no mutable state: one Augmenter serves every worker
// goroutine; per-goroutine state lives in a Plan and a Workspace.
type Augmenter struct {
	cfg      config.Augment
	patch    [3]int
	channels int
	cubic    bool
	rotAxes  []int
	mirAxes  []int
	r90Axes  []int
	lrAxes   [3]bool
	// ignore is the ignore label (0: none), never a crop's centre.
	ignore int
}

// SetIgnoreLabel makes foreground-centred crops skip the ignore label's
// voxels (loss.ignore_label; 0: none): a patch centred on voxels the loss
// leaves out would teach nothing.
func (a *Augmenter) SetIgnoreLabel(n int) { a.ignore = n }

// New checks cfg and returns an Augmenter for patches of the given (D, H, W)
// size with the given number of image channels.
func New(cfg config.Augment, patch [3]int, channels int) (*Augmenter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	for i, p := range patch {
		if p <= 0 {
			return nil, fmt.Errorf("augment: patch size %v: axis %d is %d, want > 0", patch, i, p)
		}
	}
	if int64(patch[0])*int64(patch[1])*int64(patch[2]) > math.MaxInt32 {
		return nil, fmt.Errorf("augment: patch size %v has more than 2^31-1 voxels", patch)
	}
	if channels <= 0 {
		return nil, fmt.Errorf("augment: %d image channels, want > 0", channels)
	}
	a := &Augmenter{
		cfg:      cfg,
		patch:    patch,
		channels: channels,
		cubic:    cfg.Interpolation == "cubic",
		rotAxes:  append([]int(nil), cfg.Rotation.Axes...),
		mirAxes:  append([]int(nil), cfg.Mirror.Axes...),
		r90Axes:  append([]int(nil), cfg.Rot90.Axes...),
	}
	for _, ax := range cfg.LowRes.Axes {
		a.lrAxes[ax] = true
	}
	return a, nil
}

// Patch returns the output patch size (D, H, W).
func (a *Augmenter) Patch() [3]int { return a.patch }

// Channels returns the number of image channels.
func (a *Augmenter) Channels() int { return a.channels }

// Config returns the Augmenter's configuration.
func (a *Augmenter) Config() config.Augment { return a.cfg }
