package nn

import (
	"fmt"
	"math"

	"github.com/voxtrain/voxtrain/config"
)

// DeepSupervisionWeights returns nnU-Net's weights for n outputs: 1, ½, ¼,
// …, the last set to 0, normalised to sum 1 (a single output gets 1).
func DeepSupervisionWeights(n int) []float64 {
	w := make([]float64, n)
	var sum float64
	for i := range w {
		w[i] = 1 / math.Pow(2, float64(i))
		if i == n-1 && n > 1 {
			w[i] = 0
		}
		sum += w[i]
	}
	for i := range w {
		w[i] /= sum
	}
	return w
}

// LossValue is the value of a loss evaluation. Total is what is minimised;
// the terms are the unweighted values at full resolution, for logging
// (zero for terms the loss does not use).
type LossValue struct {
	Total                 float64
	CE, Dice, ClDice, BCE float64
}

// lossOut holds the per-output buffers of a Criterion.
type lossOut struct {
	weight  float64
	labels  Tensor // downsampled labels (nil for output 0: the input labels)
	probs   Tensor
	dlogits Tensor
	// clDice only
	onehot, skelP, skelT, extra, dskel Tensor
	// bce + clDice only: the one-channel logits z as two-class logits
	// [0, z] (whose softmax is [1−σ(z), σ(z)]), their gradient, and
	// one-channel scratch for the split.
	zero, logits2, dlogits2, dz, dzero Tensor
}

// Criterion computes a loss and its gradient with respect to a U-Net's
// outputs, with buffers allocated once for one workspace shape.
type Criterion struct {
	cfg  config.Loss
	dev  Device
	outs []lossOut
	k    int // classes (channels)
	// ignore is loss.ignore_label (−1: none) and idev the device's ops
	// that leave its voxels out.
	ignore int
	idev   IgnoreLossDevice
	// mdev is the device's multi-label ops (loss dice_bce only).
	mdev MultiLabelLossDevice
	// ranks and sumRanks make a batch Dice global over a data-parallel
	// job (SetBatchReducer); sumRanks nil: a process alone.
	ranks    int
	sumRanks func(xs []float64) error
	// partial says samples may have unknown classes (AllowUnknown), and
	// unknown is each sample's, for the next Compute (SetUnknown; nil:
	// every class known).
	partial bool
	unknown []uint8
}

// AllowUnknown lets a multi-label criterion (loss dice_bce) take samples
// whose crops do not annotate every class (SetUnknown), as cellmap's
// crops are: an unknown (sample, class) is left out of the BCE's mean
// (its term and its count), of the Dice sums and of the per-sample Dice's
// mean, and gets a zero gradient. In a data-parallel job the counts these
// means divide by then differ between ranks, so they are summed over the
// ranks (SetBatchReducer) as the ignore label's count is: the BCE's count
// of kept elements, the per-sample Dice's count of known (sample, class)
// pairs, and with batch_dice each class's number of samples that know it
// (a class no sample of the global batch knows is left out of the mean
// over classes). Every rank must call it alike, before the first Compute.
func (c *Criterion) AllowUnknown() error {
	if c.cfg.Name != "dice_bce" {
		return fmt.Errorf("loss.name: %s; classes a crop does not annotate (a manifest's unlisted_classes: unknown) are left out of the multi-label loss dice_bce only", c.cfg.Name)
	}
	c.partial = true
	return nil
}

// SetUnknown sets each sample's unknown classes for the next Compute:
// bit c of unknown[n] set means sample n's crop does not annotate class
// (channel) c (data.Batch.Unknown). nil means every class is known. The
// criterion keeps the slice until the next SetUnknown.
func (c *Criterion) SetUnknown(unknown []uint8) { c.unknown = unknown }

// known returns which (sample, class) pairs count, [n·C+c], for the
// unknown classes of SetUnknown; nil when every pair does.
func (c *Criterion) known(n, k int) ([]bool, error) {
	some := false
	for _, u := range c.unknown {
		some = some || u != 0
	}
	if !some {
		return nil, nil
	}
	if !c.partial {
		return nil, fmt.Errorf("loss: samples with unknown classes, but the criterion does not allow them (AllowUnknown)")
	}
	if len(c.unknown) != n {
		return nil, fmt.Errorf("loss: unknown classes of %d samples for a batch of %d", len(c.unknown), n)
	}
	known := make([]bool, n*k)
	for s, u := range c.unknown {
		for ch := 0; ch < k; ch++ {
			known[s*k+ch] = u>>ch&1 == 0
		}
	}
	return known, nil
}

// SetBatchReducer makes the batch Dice (loss.batch_dice) of a
// data-parallel job of ranks processes the global batch's, as nnU-Net v2's
// Dice losses do under DDP (they all-gather the sums): before the Dice and
// its gradient are computed, sum replaces the per-class sums of this
// rank's batch (intersection, prediction and target sums, 3·classes
// values, all ≥ 0) by their sums over the ranks. With an ignore label it
// also sums the kept voxels the cross-entropy's mean divides by (see
// globalCount), so that mean is the global batch's too. Every rank must
// call Compute at the same steps, so that the calls of sum match: per
// output of non-zero weight, highest resolution first, the count (with an
// ignore label or AllowUnknown), the known pairs of the per-sample Dice
// (AllowUnknown without batch_dice), the Dice sums (with batch_dice) and
// clDice's four sums (with a clDice weight). An error from sum fails
// Compute.
//
// The gradient each rank then writes is ranks times the global Dice's
// gradient with respect to its own outputs, because the job averages its
// ranks' parameter gradients (Learner.ReduceGrads divides their sum by
// N = ranks). The global loss is L = CE + D with D the global batch Dice
// and CE = (1/N)·Σ_r CE_r, each CE_r rank r's mean over its own voxels
// (equal shares: the global mean). Rank r's outputs z_r depend on the
// shared weights θ, so ∂L/∂θ = Σ_r (∂CE/∂z_r + ∂D/∂z_r)·∂z_r/∂θ, and
// with rank r's gradient g_r = (∂CE_r/∂z_r + N·∂D/∂z_r)·∂z_r/∂θ the
// average (1/N)·Σ_r g_r is exactly that. nnU-Net gets the same factor N
// from its all-gather's backward (an all-reduce of the gradients) before
// DDP's average. Per-sample Dice (batch_dice false) is a mean over
// samples like CE and needs neither.
func (c *Criterion) SetBatchReducer(ranks int, sum func(xs []float64) error) {
	c.ranks, c.sumRanks = ranks, sum
}

// HasBatchTerms reports whether the loss has terms that are not a mean
// of per-sample terms — the batch Dice, clDice (one Tprec and Tsens over
// the batch), the cross-entropy's mean over the kept voxels of an ignore
// label — and so needs SetBatchReducer in a data-parallel job.
func (c *Criterion) HasBatchTerms() bool {
	_, _, wCl := c.cfg.TermWeights()
	return c.cfg.BatchDice || c.ignore >= 0 || wCl > 0 || c.partial
}

// NewCriterion allocates a criterion for network outputs (logits) of the
// given channels-last shapes (N, D, H, W, classes), highest resolution
// first, as Workspace.OutputShapes returns them.
func NewCriterion(dev Device, cfg config.Loss, outputs []Shape) (*Criterion, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(outputs) == 0 {
		return nil, fmt.Errorf("loss: no outputs")
	}
	for i, s := range outputs {
		if len(s) != 5 || s[4] != outputs[0][4] || s[0] != outputs[0][0] {
			return nil, fmt.Errorf("loss: output %d has shape %v, want (N, D, H, W, classes) like output 0 %v", i, s, outputs[0])
		}
	}
	k := outputs[0][4]
	if cfg.Name == "bce" && k != 1 {
		return nil, fmt.Errorf("loss.name: bce needs model.num_classes 1 (a sigmoid output), have %d", k)
	}
	if cfg.Name != "bce" && cfg.Name != "dice_bce" && k < 2 {
		return nil, fmt.Errorf("loss.name: %s needs model.num_classes >= 2 (softmax over classes), have %d; use bce for one output channel", cfg.Name, k)
	}
	n := len(outputs)
	weights := DeepSupervisionWeights(n)
	// Empty is unset: a resolved config (a run's config.yaml) writes the
	// unset list as [], which must read back as nnU-Net's weights.
	if len(cfg.DeepSupervisionWeights) > 0 {
		if len(cfg.DeepSupervisionWeights) != n {
			return nil, fmt.Errorf("loss.deep_supervision_weights: %d weights for %d outputs", len(cfg.DeepSupervisionWeights), n)
		}
		var sum float64
		for _, w := range cfg.DeepSupervisionWeights {
			sum += w
		}
		if sum == 0 {
			return nil, fmt.Errorf("loss.deep_supervision_weights: all zero")
		}
		weights = make([]float64, n)
		for i, w := range cfg.DeepSupervisionWeights {
			weights[i] = w / sum
		}
	}
	c := &Criterion{cfg: cfg, dev: dev, k: k, ignore: cfg.Ignore()}
	if cfg.Name == "dice_bce" {
		if k > 7 {
			return nil, fmt.Errorf("model.num_classes: %d multi-label classes, at most 7 fit the bit-packed label byte", k)
		}
		mdev, ok := dev.(MultiLabelLossDevice)
		if !ok {
			return nil, fmt.Errorf("loss.name: dice_bce (model.targets multi_label): the %s device has no multi-label sigmoid loss (the CPU and CUDA devices have); train on one of those", dev.Name())
		}
		c.mdev = mdev
	} else if c.ignore >= 0 {
		if c.ignore < k {
			return nil, fmt.Errorf("loss.ignore_label: %d is one of the %d classes; it must be ≥ model.num_classes", c.ignore, k)
		}
		idev, ok := dev.(IgnoreLossDevice)
		if !ok {
			return nil, fmt.Errorf("loss.ignore_label: the %s device cannot leave ignored voxels out of the loss (the CPU and CUDA devices can); drop ignore_label or use one of those", dev.Name())
		}
		c.idev = idev
	}
	for i, s := range outputs {
		o := lossOut{weight: weights[i], dlogits: dev.Alloc(s)}
		if i > 0 {
			o.labels = dev.Alloc(Shape{s[0], s[1], s[2], s[3]})
		}
		if cfg.Name != "bce" {
			o.probs = dev.Alloc(s)
		}
		if _, _, wCl := cfg.TermWeights(); wCl > 0 {
			ps := s // the probabilities clDice works on
			if cfg.Name == "bce" {
				ps = Shape{s[0], s[1], s[2], s[3], 2}
				o.probs = dev.Alloc(ps)
				o.zero, o.dz, o.dzero = dev.Alloc(s), dev.Alloc(s), dev.Alloc(s)
				o.logits2, o.dlogits2 = dev.Alloc(ps), dev.Alloc(ps)
			}
			o.onehot, o.skelP, o.skelT = dev.Alloc(ps), dev.Alloc(ps), dev.Alloc(ps)
			o.extra, o.dskel = dev.Alloc(ps), dev.Alloc(ps)
		}
		c.outs = append(c.outs, o)
	}
	return c, nil
}

// Free releases the criterion's buffers.
func (c *Criterion) Free() {
	for _, o := range c.outs {
		for _, t := range []Tensor{o.labels, o.probs, o.dlogits, o.onehot, o.skelP, o.skelT, o.extra, o.dskel,
			o.zero, o.logits2, o.dlogits2, o.dz, o.dzero} {
			if t != nil {
				c.dev.Free(t)
			}
		}
	}
}

// Weights returns the weight of each output in the total loss.
func (c *Criterion) Weights() []float64 {
	w := make([]float64, len(c.outs))
	for i, o := range c.outs {
		w[i] = o.weight
	}
	return w
}

// Grads returns the gradients of the last Compute with respect to each
// output (pass them to UNet.Backward).
func (c *Criterion) Grads() []Tensor {
	g := make([]Tensor, len(c.outs))
	for i, o := range c.outs {
		g[i] = o.dlogits
	}
	return g
}

// Probs returns the softmax probabilities (σ for dice_bce) of output i
// computed by the last Compute (nil for bce).
func (c *Criterion) Probs(i int) Tensor { return c.outs[i].probs }

// Compute evaluates the loss of outputs (as returned by UNet.Forward)
// against labels (N, D, H, W) and writes its gradients (see Grads).
func (c *Criterion) Compute(outputs []Tensor, labels Tensor) (LossValue, error) {
	if len(outputs) != len(c.outs) {
		return LossValue{}, fmt.Errorf("loss: %d outputs, criterion built for %d", len(outputs), len(c.outs))
	}
	var total LossValue
	for i := range c.outs {
		o := &c.outs[i]
		lab := labels
		if i > 0 {
			// Nearest-exact picks one source voxel's value, so an ignored
			// voxel stays the ignore label and never becomes a class.
			c.dev.DownsampleLabels(labels, o.labels)
			lab = o.labels
		}
		if o.weight == 0 {
			c.dev.Fill(o.dlogits, 0)
			continue
		}
		var v LossValue
		var err error
		switch c.cfg.Name {
		case "bce":
			v, err = c.bce(outputs[i], lab, o)
		case "dice_bce":
			v, err = c.multiLabel(outputs[i], lab, o)
		default:
			v, err = c.softmax(outputs[i], lab, o)
		}
		if err != nil {
			return LossValue{}, fmt.Errorf("loss (output %d): %w", i, err)
		}
		total.Total += o.weight * v.Total
		if i == 0 {
			v.Total = 0
			total.CE, total.Dice, total.ClDice, total.BCE = v.CE, v.Dice, v.ClDice, v.BCE
		}
	}
	return total, nil
}

// bce computes the weighted BCE of one output with its gradient, scaled by
// the output's weight, plus clDice on σ(logits) when its weight is set
// (thin structures: vessels, membranes, neurites).
func (c *Criterion) bce(logits, labels Tensor, o *lossOut) (LossValue, error) {
	s := logits.Shape()
	count := float64(s.Len())
	sums, err := c.dev.SigmoidBCE(logits, labels, float32(c.cfg.PosWeight), float32(o.weight/count), o.dlogits)
	if err != nil {
		return LossValue{}, err
	}
	var t float64
	for _, v := range sums {
		t += v
	}
	t /= count
	v := LossValue{Total: t, BCE: t}
	if _, _, wCl := c.cfg.TermWeights(); wCl > 0 {
		// softmax([0, z]) = [1−σ(z), σ(z)]: clDice on the two-class form
		// reuses the softmax clDice exactly, and ∂/∂z is the gradient with
		// respect to the second logit.
		dev := c.dev
		dev.ConcatChannels(o.zero, logits, o.logits2)
		if _, err := dev.SoftmaxLoss(o.logits2, labels, o.probs); err != nil {
			return LossValue{}, err
		}
		cl, err := c.clDiceK(labels, o, o.weight*wCl, 2)
		if err != nil {
			return LossValue{}, err
		}
		n := s[0]
		zeroN := make([]float32, n)
		zeroNK := make([]float32, 2*n)
		dev.SoftmaxLossBackward(o.probs, labels, zeroN, zeroNK, zeroNK, o.extra, o.dlogits2)
		dev.SplitChannels(o.dlogits2, o.dzero, o.dz)
		dev.Add(o.dlogits, o.dz)
		v.ClDice = cl
		v.Total = t + wCl*cl
	}
	return v, nil
}

// softmax computes the softmax-based terms (CE, Dice, clDice) of one output
// and writes their gradient, scaled by the output's weight.
func (c *Criterion) softmax(logits, labels Tensor, o *lossOut) (LossValue, error) {
	var st SegStats
	var err error
	if c.idev != nil {
		st, err = c.idev.SoftmaxLossIgnore(logits, labels, o.probs, c.ignore)
	} else {
		st, err = c.dev.SoftmaxLoss(logits, labels, o.probs)
	}
	if err != nil {
		return LossValue{}, err
	}
	n, k := st.N, st.C
	wCE, wDice, wCl := c.cfg.TermWeights()
	var v LossValue

	// Cross-entropy: mean over the N·V voxels, or over those not ignored
	// (PyTorch's CrossEntropyLoss(ignore_index), mean reduction); 0 when
	// every voxel is ignored, as nnU-Net's DC_and_CE_loss gives.
	count := float64(n * st.Voxels)
	if st.Counted != nil {
		count = 0
		for _, m := range st.Counted {
			count += m
		}
	}
	var ceScale []float32
	if v.CE, ceScale, err = c.voxelMean(st, count, o.weight*wCE); err != nil {
		return LossValue{}, err
	}
	v.Total += wCE * v.CE

	// Soft Dice: dL/dp = alpha·g + beta per (n, c).
	alpha := make([]float32, n*k)
	beta := make([]float32, n*k)
	if wDice > 0 {
		d, a, b, err := c.softDice(st, c.cfg.DoBackground, nil)
		if err != nil {
			return LossValue{}, err
		}
		v.Dice = d
		v.Total += wDice * d
		for i := range alpha {
			alpha[i] = float32(o.weight * wDice * a[i])
			beta[i] = float32(o.weight * wDice * b[i])
		}
	}

	var extra Tensor
	if wCl > 0 {
		cl, err := c.clDice(labels, o, o.weight*wCl)
		if err != nil {
			return LossValue{}, err
		}
		v.ClDice = cl
		v.Total += wCl * cl
		extra = o.extra
	}
	if c.idev != nil {
		c.idev.SoftmaxLossBackwardIgnore(o.probs, labels, ceScale, alpha, beta, extra, o.dlogits, c.ignore)
	} else {
		c.dev.SoftmaxLossBackward(o.probs, labels, ceScale, alpha, beta, extra, o.dlogits)
	}
	return v, nil
}

// multiLabel computes nnU-Net's DC_and_BCE_loss of one multi-label
// output against bit-packed labels and writes its gradient, scaled by the
// output's weight: BCE with logits averaged over the voxels not ignored
// and the channels, plus soft Dice on σ(logits) of every channel (no
// background channel to leave out), the ignored voxels in no sum. The
// (sample, class) pairs SetUnknown marks unknown are in neither term
// (cellmap-data's NaN targets, which its losses leave out) and get a zero
// gradient.
func (c *Criterion) multiLabel(logits, labels Tensor, o *lossOut) (LossValue, error) {
	st, err := c.mdev.SigmoidMultiLabelLoss(logits, labels, o.probs, c.ignore >= 0)
	if err != nil {
		return LossValue{}, err
	}
	n, k := st.N, st.C
	if len(st.CE) != n*k {
		return LossValue{}, fmt.Errorf("the %s device's multi-label loss gave %d BCE sums for %d samples of %d channels, want one per sample and channel", c.dev.Name(), len(st.CE), n, k)
	}
	known, err := c.known(n, k)
	if err != nil {
		return LossValue{}, err
	}
	wBCE, wDice, _ := c.cfg.TermWeights()
	var v LossValue
	// nnU-Net averages over every element without an ignore label and
	// over the kept voxels (not times channels) with one; here it is the
	// mean over kept elements either way, so one setting of the weights
	// means the same with and without ignored voxels (and unknown
	// classes).
	var count float64
	for s, m := range st.Counted {
		for ch := 0; ch < k; ch++ {
			if known == nil || known[s*k+ch] {
				count += m
			}
		}
	}
	count, ranks, err := c.globalCount(st, count)
	if err != nil {
		return LossValue{}, err
	}
	bceScale := make([]float32, n*k)
	if count > 0 {
		w := o.weight * wBCE * ranks / count
		for i := range bceScale {
			if known == nil || known[i] {
				v.BCE += ranks * st.CE[i] / count
				bceScale[i] = float32(w)
			}
		}
	}
	v.Total += wBCE * v.BCE
	alpha := make([]float32, n*k)
	beta := make([]float32, n*k)
	if wDice > 0 {
		d, a, b, err := c.softDice(st, true, known)
		if err != nil {
			return LossValue{}, err
		}
		v.Dice = d
		v.Total += wDice * d
		for i := range alpha {
			alpha[i] = float32(o.weight * wDice * a[i])
			beta[i] = float32(o.weight * wDice * b[i])
		}
	}
	c.mdev.SigmoidMultiLabelLossBackward(o.probs, labels, bceScale, alpha, beta, o.dlogits, c.ignore >= 0)
	return v, nil
}

// voxelMean returns the mean of the per-sample sums st.CE over count
// voxels — in a job with an ignore label, the global batch's (globalCount)
// — and each sample's gradient scale, w (the output's and the term's
// weight) over that count; 0 and zero scales when nothing is counted.
func (c *Criterion) voxelMean(st SegStats, count, w float64) (float64, []float32, error) {
	count, ranks, err := c.globalCount(st, count)
	if err != nil {
		return 0, nil, err
	}
	var mean float64
	scale := make([]float32, st.N)
	if count > 0 {
		for b := range scale {
			mean += ranks * st.CE[b] / count
			scale[b] = float32(w * ranks / count)
		}
	}
	return mean, scale, nil
}

// globalCount returns the number of voxels the cross-entropy's mean runs
// over and the factor its terms take (see SetBatchReducer). With an
// ignore label each rank counts its own kept voxels, so in a job the
// global batch's mean divides the ranks' summed terms by the count summed
// over the ranks: each rank's CE term is then ranks·Σ_r-own / count, whose
// mean over the ranks is the global mean, and its gradient ranks times
// the global mean's (the job averages the ranks' gradients). Without an
// ignore label every rank counts the same voxels and the mean of the
// ranks' means is the global one already: count as given, factor 1.
func (c *Criterion) globalCount(st SegStats, count float64) (float64, float64, error) {
	if c.sumRanks == nil || st.Counted == nil || (c.ignore < 0 && !c.partial) {
		return count, 1, nil
	}
	xs := []float64{count}
	if err := c.sumRanks(xs); err != nil {
		return 0, 0, fmt.Errorf("the loss's voxel count over the ranks: %w", err)
	}
	return xs[0], float64(c.ranks), nil
}

// softDice returns the soft Dice loss of st and its gradient coefficients
// (see diceTerms): per sample, or with loss.batch_dice over the batch —
// the job's global batch when the criterion has a batch reducer. known,
// when not nil, says which (sample, class) pairs count ([n·C+c]).
func (c *Criterion) softDice(st SegStats, doBG bool, known []bool) (loss float64, a, b []float64, err error) {
	n, k := st.N, st.C
	c0 := 1
	if doBG {
		c0 = 0
	}
	if !c.cfg.BatchDice {
		pairs, scale := float64(n*(k-c0)), 1.0
		if c.partial {
			// The known pairs differ between samples, so between ranks:
			// a job's mean runs over all of theirs (see AllowUnknown).
			pairs = 0
			for s := 0; s < n; s++ {
				for ch := c0; ch < k; ch++ {
					if known == nil || known[s*k+ch] {
						pairs++
					}
				}
			}
			if c.sumRanks != nil {
				xs := []float64{pairs}
				if err := c.sumRanks(xs); err != nil {
					return 0, nil, nil, fmt.Errorf("per-sample Dice's known pairs over the ranks: %w", err)
				}
				pairs, scale = xs[0], float64(c.ranks)
			}
		}
		loss, a, b = diceTerms(st, false, doBG, c.cfg.Smooth, nil, known, pairs, scale)
		return loss, a, b, nil
	}
	sums := batchSums(st, known, c.partial)
	scale := 1.0
	if c.sumRanks != nil {
		if err := c.sumRanks(sums); err != nil {
			return 0, nil, nil, fmt.Errorf("batch Dice over the ranks: %w", err)
		}
		scale = float64(c.ranks)
	}
	loss, a, b = diceTerms(st, true, doBG, c.cfg.Smooth, sums, known, 0, scale)
	return loss, a, b, nil
}

// batchSums returns the batch's per-class sums of st: intersections,
// then prediction sums, then target sums, C values each, over the known
// (sample, class) pairs (known nil: all); with partial then C more, each
// class's count of samples that know it.
func batchSums(st SegStats, known []bool, partial bool) []float64 {
	n, k := st.N, st.C
	m := 3 * k
	if partial {
		m = 4 * k
	}
	sums := make([]float64, m)
	for c := 0; c < k; c++ {
		for s := 0; s < n; s++ {
			if known != nil && !known[s*k+c] {
				continue
			}
			sums[c] += st.Intersect[s*k+c]
			sums[k+c] += st.PredSum[s*k+c]
			sums[2*k+c] += st.TargetSum[s*k+c]
			if partial {
				sums[3*k+c]++
			}
		}
	}
	return sums
}

// diceTerms returns the Dice loss 1 − mean(dc) and its gradient
// coefficients: ∂loss/∂p[n,v,c] = a[n·C+c]·[label = c] + b[n·C+c]. With
// batch, the dc of each class is that of sums (batchSums' layout; with
// its counts of knowing samples, a class none knows is left out of the
// mean over classes). Without, the mean runs over pairs (sample, class)
// terms: the known pairs (known nil: all), in a job all ranks'. The
// coefficients are scaled by gradScale (see SetBatchReducer, AllowUnknown)
// and are zero for unknown pairs. With nothing to average the loss is 0.
func diceTerms(st SegStats, batch, doBG bool, smooth float64, sums []float64, known []bool, pairs, gradScale float64) (loss float64, a, b []float64) {
	n, k := st.N, st.C
	a, b = make([]float64, n*k), make([]float64, n*k)
	c0 := 1
	if doBG {
		c0 = 0
	}
	type term struct{ num, den float64 }
	dc := func(inter, psum, tsum float64) term {
		return term{2*inter + smooth, max(psum+tsum+smooth, 1e-8)}
	}
	if batch {
		live := func(c int) bool { return len(sums) < 4*k || sums[3*k+c] > 0 }
		m := 0.0
		for c := c0; c < k; c++ {
			if live(c) {
				m++
			}
		}
		if m == 0 {
			return 0, a, b
		}
		for c := c0; c < k; c++ {
			if !live(c) {
				continue
			}
			t := dc(sums[c], sums[k+c], sums[2*k+c])
			loss += t.num / t.den / m
			for s := 0; s < n; s++ {
				if known != nil && !known[s*k+c] {
					continue
				}
				a[s*k+c] = -2 / (t.den * m) * gradScale
				b[s*k+c] = t.num / (t.den * t.den * m) * gradScale
			}
		}
		return 1 - loss, a, b
	}
	if pairs == 0 {
		return 0, a, b
	}
	m := pairs
	for s := 0; s < n; s++ {
		for c := c0; c < k; c++ {
			i := s*k + c
			if known != nil && !known[i] {
				continue
			}
			t := dc(st.Intersect[i], st.PredSum[i], st.TargetSum[i])
			loss += t.num / t.den / m
			a[i] = -2 / (t.den * m) * gradScale
			b[i] = t.num / (t.den * t.den * m) * gradScale
		}
	}
	return 1 - gradScale*loss, a, b
}

// clDice computes the clDice loss of the probabilities in o.probs and
// leaves w times its gradient with respect to the probabilities in o.extra.
func (c *Criterion) clDice(labels Tensor, o *lossOut, w float64) (float64, error) {
	return c.clDiceK(labels, o, w, c.k)
}

// clDiceK is clDice over k classes (channel 0 background).
func (c *Criterion) clDiceK(labels Tensor, o *lossOut, w float64, k int) (float64, error) {
	dev := c.dev
	iters := c.cfg.SkeletonIters
	if err := dev.OneHot(labels, o.onehot); err != nil {
		return 0, err
	}
	dev.SoftSkeleton(o.probs, o.skelP, iters, 1)
	dev.SoftSkeleton(o.onehot, o.skelT, iters, 1)
	sumFg := func(v []float64) float64 {
		var s float64
		for i, x := range v {
			if i%k != 0 {
				s += x
			}
		}
		return s
	}
	sm := c.cfg.ClDiceSmooth
	A := sumFg(dev.ChannelDot(o.skelP, o.onehot))
	B := sumFg(dev.ChannelDot(o.skelP, nil))
	C := sumFg(dev.ChannelDot(o.skelT, o.probs))
	D := sumFg(dev.ChannelDot(o.skelT, nil))
	if c.sumRanks != nil {
		// clDice is a batch term (one Tprec and Tsens over the batch's
		// sums), so a job's is the global batch's, its gradient ranks
		// times as for the batch Dice (see SetBatchReducer).
		sums := []float64{A, B, C, D}
		if err := c.sumRanks(sums); err != nil {
			return 0, fmt.Errorf("clDice over the ranks: %w", err)
		}
		A, B, C, D = sums[0], sums[1], sums[2], sums[3]
		w *= float64(c.ranks)
	}
	tprec := (A + sm) / (B + sm)
	tsens := (C + sm) / (D + sm)
	loss := 1 - 2*tprec*tsens/(tprec+tsens)
	dPrec := -2 * tsens * tsens / ((tprec + tsens) * (tprec + tsens))
	dSens := -2 * tprec * tprec / ((tprec + tsens) * (tprec + tsens))
	n := labels.Shape()[0]
	// ∂tprec/∂skelP = (onehot − tprec)/(B + s), ∂tsens/∂p = skelT/(D + s),
	// foreground channels only.
	k1 := make([]float32, n*k)
	b1 := make([]float32, n*k)
	k2 := make([]float32, n*k)
	for i := range k1 {
		if i%k == 0 {
			continue
		}
		k1[i] = float32(w * dPrec / (B + sm))
		b1[i] = float32(-w * dPrec * tprec / (B + sm))
		k2[i] = float32(w * dSens / (D + sm))
	}
	dev.Fill(o.dskel, 0)
	dev.ChannelAffineAdd(o.dskel, o.onehot, k1, b1)
	dev.Fill(o.extra, 0)
	dev.ChannelAffineAdd(o.extra, o.skelT, k2, nil)
	dev.SoftSkeletonBackward(o.probs, o.dskel, o.extra, iters, 1)
	return loss, nil
}
