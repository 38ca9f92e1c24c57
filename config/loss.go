package config

import (
	"fmt"
	"math"
)

// Loss is the `loss:` section: the training loss (package nn computes
// it). The loss is a weighted sum of terms computed on every network
// output (with deep supervision, each output against labels downsampled by
// nearest-exact and weighted 1, ½, ¼, …, lowest 0, renormalised):
//
//	ce      cross-entropy of softmax(logits), mean over voxels and samples
//	dice    1 − mean soft Dice over classes (and samples unless batch_dice),
//	        dc = (2·Σp·g + smooth) / max(Σp + Σg + smooth, 1e-8)  (nnU-Net's
//	        MemoryEfficientSoftDiceLoss, shifted by 1 to be non-negative)
//	cldice  1 − 2·Tprec·Tsens/(Tprec + Tsens) on soft skeletons of the
//	        foreground channels (Shit et al. 2021, reference PyTorch code)
//	bce     BCEWithLogits(pos_weight) for a one-channel (sigmoid) output;
//	        with cldice_weight > 0 also clDice on σ(logits) (thin structures)
//	dice_bce  multi-label sigmoid outputs (model.targets multi_label),
//	        nnU-Net's DC_and_BCE_loss: ce_weight × BCEWithLogits averaged
//	        over voxels and channels, plus dice_weight × soft Dice on
//	        σ(logits) of every channel (do_bg is not used: there is no
//	        background channel)
//
// With ignore_label N, voxels labelled N are left out of ce and dice (and
// of the validation metrics) as nnU-Net v2's ignore label is: ce is the
// mean over the other voxels, dice's sums run over the other voxels only
// (nnU-Net's loss_mask), and their gradient is zero.
type Loss struct {
	// Name is dice_ce (nnU-Net's), ce, dice, cldice, bce or dice_bce
	// (multi-label); it picks the
	// weights of the terms the file does not give (see TermWeights).
	Name         string   `yaml:"name"`
	CEWeight     *float64 `yaml:"ce_weight"`
	DiceWeight   *float64 `yaml:"dice_weight"`
	ClDiceWeight *float64 `yaml:"cldice_weight"`
	// BatchDice sums the Dice statistics over the batch before the ratio.
	BatchDice bool `yaml:"batch_dice"`
	// DoBackground includes class 0 in the Dice mean (nnU-Net: false).
	DoBackground bool `yaml:"do_bg"`
	// Smooth is the Dice smoothing term.
	Smooth float64 `yaml:"smooth"`
	// SkeletonIters is the soft skeleton's iterations and ClDiceSmooth
	// clDice's smoothing (as the reference code).
	SkeletonIters int     `yaml:"skeleton_iters"`
	ClDiceSmooth  float64 `yaml:"cldice_smooth"`
	// PosWeight weighs the positive class of bce.
	PosWeight float64 `yaml:"pos_weight"`
	// DeepSupervisionWeights overrides nnU-Net's output weights (one per
	// output, highest resolution first; renormalised to sum 1); empty:
	// nnU-Net's.
	DeepSupervisionWeights []float64 `yaml:"deep_supervision_weights"`
	// IgnoreLabel is the label value whose voxels are excluded from the
	// loss and the metrics (nil: none). It is not a class: model.num_classes
	// does not count it, and it must be ≥ model.num_classes (nnU-Net v2
	// makes it the highest label value; voxtrain also accepts a higher one,
	// such as 255).
	IgnoreLabel *int `yaml:"ignore_label"`
}

// Ignore returns the ignore label, or -1 when there is none.
func (c Loss) Ignore() int {
	if c.IgnoreLabel == nil {
		return -1
	}
	return *c.IgnoreLabel
}

// Validate reports the first problem of the section, naming the key.
func (c Loss) Validate() error {
	switch c.Name {
	case "dice_ce", "ce", "dice", "cldice", "bce", "dice_bce":
	default:
		return fmt.Errorf("loss.name: %q, want dice_ce, ce, dice, cldice, bce or dice_bce", c.Name)
	}
	ce, dice, cldice := c.TermWeights()
	for _, w := range []struct {
		name string
		v    float64
	}{{"ce_weight", ce}, {"dice_weight", dice}, {"cldice_weight", cldice}, {"smooth", c.Smooth}, {"cldice_smooth", c.ClDiceSmooth}, {"pos_weight", c.PosWeight}} {
		if w.v < 0 || math.IsNaN(w.v) || math.IsInf(w.v, 0) {
			return fmt.Errorf("loss.%s: %v, want a finite value >= 0", w.name, w.v)
		}
	}
	// Zero means zero, and these two cannot be zero: a pos_weight of 0
	// drops the positives from bce, a cldice_smooth of 0 divides by an
	// empty skeleton.
	if c.PosWeight == 0 {
		return fmt.Errorf("loss.pos_weight: 0, want > 0 (1: the positives weigh as the negatives)")
	}
	if c.ClDiceSmooth == 0 {
		return fmt.Errorf("loss.cldice_smooth: 0, want > 0 (the default is 1)")
	}
	if c.Name == "dice_bce" && cldice > 0 {
		return fmt.Errorf("loss.cldice_weight: %v, not supported with dice_bce (multi-label); set it to 0", cldice)
	}
	if c.Name != "bce" && ce+dice+cldice == 0 {
		return fmt.Errorf("loss: all term weights are 0")
	}
	if c.SkeletonIters < 0 {
		return fmt.Errorf("loss.skeleton_iters: %d, want >= 0", c.SkeletonIters)
	}
	for i, w := range c.DeepSupervisionWeights {
		if w < 0 || math.IsNaN(w) || math.IsInf(w, 0) {
			return fmt.Errorf("loss.deep_supervision_weights[%d]: %v, want a finite value >= 0", i, w)
		}
	}
	if c.IgnoreLabel != nil {
		n := *c.IgnoreLabel
		if n <= 0 || n > 255 {
			return fmt.Errorf("loss.ignore_label: %d, want a label value in 1..255 (0 is background)", n)
		}
		// bce's and clDice's sums have no mask yet; refusing beats
		// training the ignored voxels as background.
		if c.Name == "bce" {
			return fmt.Errorf("loss.ignore_label: not supported with loss.name bce; use dice_ce, ce or dice")
		}
		if c.Name == "dice_bce" && n != 255 {
			return fmt.Errorf("loss.ignore_label: %d, but dice_bce's multi-label labels are bit-packed (bit c: class c) and their ignore value is 255; set loss.ignore_label: 255", n)
		}
		if cldice > 0 {
			return fmt.Errorf("loss.ignore_label: not supported with clDice (loss.cldice_weight %v); set it to 0 or drop ignore_label", cldice)
		}
	}
	return nil
}
