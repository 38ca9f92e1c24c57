package trainer

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/evaluation"
	"github.com/voxtrain/voxtrain/infer"
	"github.com/voxtrain/voxtrain/metrics"
	"github.com/voxtrain/voxtrain/nn"
	"github.com/voxtrain/voxtrain/runlog"
)

// validator runs a run's validation after the epochs config.Validation
// names: plain patches of the held-out cases through the worker pool
// (nnU-Net's pseudo Dice, every epoch) and/or whole cases by sliding
// window (nnU-Net's final validation). Its device buffers and the
// validation stream are made on first use and kept.
type validator struct {
	cfg    config.Validation
	batch  int
	patch  [3]int
	loss   config.Loss
	model  *nn.UNet
	loader *data.Loader
	// job, in a data-parallel job, shards the patch validation over the
	// ranks and sums its counts and losses, so that every rank gets the
	// numbers one process with the global batch would (nil: one process).
	job *job

	// patch validation, made on first use
	ws           *nn.Workspace
	crit         *nn.Criterion
	image, label nn.Tensor
	batches      *data.BatchStream
	// sliding-window validation, made on first use
	net *infer.DeviceNet
}

// PatchScores are the results of a patch validation: the mean loss and,
// per foreground class, the Dice of the voxel counts summed over every
// validation patch (nnU-Net's "pseudo Dice").
type PatchScores struct {
	Loss float64
	Dice []float64 // classes 1..K−1 (0..K−1 multi-label: every channel)
}

// due reports whether validation runs after epoch (1-based) of epochs.
func (v *validator) due(epoch, epochs int) bool {
	return v.cfg.Validates(epoch, epochs) && len(v.loader.ValCases()) > 0
}

// run validates and fills rec; it returns the metric for best-checkpoint
// tracking (the mean Dice; nil when it is NaN) and the time it took.
func (v *validator) run(ctx context.Context, rec *runlog.Epoch) (*float64, time.Duration, error) {
	t0 := time.Now()
	var metric *float64
	setDice := func(d []float64) {
		rec.ValDice = nil
		for _, x := range d {
			rec.ValDice = append(rec.ValDice, runlog.Float(x))
		}
		mean := metrics.NanMean(d)
		f := runlog.Float(mean)
		rec.ValDiceMean = &f
		if !math.IsNaN(mean) {
			metric = &mean
		}
	}
	if v.cfg.Mode == "patch" || v.cfg.Mode == "both" {
		sc, err := v.patches(ctx)
		if err != nil {
			return nil, time.Since(t0), err
		}
		l := runlog.Float(sc.Loss)
		rec.ValLoss = &l
		setDice(sc.Dice)
	}
	if v.cfg.Mode == "sliding" || v.cfg.Mode == "both" {
		sc, err := v.sliding(ctx)
		if err != nil {
			return nil, time.Since(t0), err
		}
		// One value per output channel, whatever the summary's keys
		// (a region given twice is one entry of it).
		dice, hd95 := infer.ChannelMeans(sc, v.loader.Dataset())
		setDice(dice) // sliding-window Dice is the better estimate
		for _, h := range hd95 {
			rec.ValHD95 = append(rec.ValHD95, runlog.Float(h))
		}
	}
	return metric, time.Since(t0), nil
}

// patches runs one epoch of the validation stream (plain patches of the
// held-out cases; the same patches every time) through the model.
func (v *validator) patches(ctx context.Context) (PatchScores, error) {
	if err := v.preparePatches(); err != nil {
		return PatchScores{}, err
	}
	dev := v.model.Device()
	var tp, fp, fn []int64
	lossSum, n := 0.0, 0
	multi := v.loss.Name == "dice_bce"

	for i := 0; i < v.batches.BatchesPerEpoch(); i++ {
		b, err := v.batches.Next(ctx)
		if err != nil {
			return PatchScores{}, fmt.Errorf("validation batch %d: %w", i, err)
		}
		// Copied: the buffer goes back to its ring before the loss.
		unknown := append([]uint8(nil), b.Unknown...)
		cs := dev.ComputeStream()
		err = dev.Upload(cs, v.image, b.Image)
		if err == nil {
			err = dev.Upload(cs, v.label, b.Label)
		}
		if err == nil {
			// The uploads read the host buffer asynchronously: release it only
			// once they are done.
			cs.Record().Synchronize()
		}
		b.Release()
		if err != nil {
			return PatchScores{}, fmt.Errorf("validation upload: %w", err)
		}
		out := v.model.Forward(v.ws, v.image)
		v.crit.SetUnknown(unknown)
		lv, err := v.crit.Compute(out, v.label)
		if err != nil {
			return PatchScores{}, fmt.Errorf("validation loss: %w", err)
		}
		var t, f, g []int64
		if md, ok := dev.(nn.MultiLabelLossDevice); ok && multi {
			// Each channel is its own class: σ > 0.5 against its bit
			// (the criterion already refused a device without this op),
			// counted per sample, a sample's unknown classes in none.
			t, f, g, err = md.SegCountsMultiLabel(out[0], v.label, v.loss.Ignore() >= 0)
			if err == nil {
				t, f, g = knownCounts(t, f, g, out[0].Shape()[0], unknown)
			}
		} else if ig, ok := dev.(nn.IgnoreLossDevice); ok && v.loss.Ignore() >= 0 {
			// The ignored voxels count in no metric (nnU-Net's evaluation);
			// the criterion already refused a device without this op.
			t, f, g, err = ig.SegCountsIgnore(out[0], v.label, v.loss.Ignore())
		} else {
			t, f, g, err = dev.SegCounts(out[0], v.label)
		}
		if err != nil {
			return PatchScores{}, fmt.Errorf("validation counts: %w", err)
		}
		if tp == nil {
			tp, fp, fn = make([]int64, len(t)), make([]int64, len(t)), make([]int64, len(t))
		}
		for c := range t {
			tp[c] += t[c]
			fp[c] += f[c]
			fn[c] += g[c]
		}
		lossSum += lv.Total
		n++
	}
	if err := dev.Err(); err != nil {
		return PatchScores{}, err
	}
	// Every rank validated its share of each global batch: the sums over
	// the ranks are the single process's (the counts exactly; the loss is
	// the mean of the ranks' batch losses, the global batch's for a loss
	// that is a mean over samples or a batch Dice summed over the ranks).
	k := len(tp)
	counts := append(append(append(make([]int64, 0, 3*k), tp...), fp...), fn...)
	if err := v.job.sumInt64(counts); err != nil {
		return PatchScores{}, fmt.Errorf("validation: %w", err)
	}
	copy(tp, counts[:k])
	copy(fp, counts[k:2*k])
	copy(fn, counts[2*k:])
	sums := []float64{lossSum, float64(n)}
	if err := v.job.sumFloat64(sums); err != nil {
		return PatchScores{}, fmt.Errorf("validation: %w", err)
	}
	lossSum, n = sums[0], int(math.Round(sums[1]))
	sc := PatchScores{Loss: lossSum / float64(max(n, 1))}
	// Channel 0 is background for softmax outputs, a class of its own
	// for multi-label ones.
	first := 1
	if multi {
		first = 0
	}
	for c := first; c < len(tp); c++ {
		sc.Dice = append(sc.Dice, metrics.Confusion{TP: tp[c], FP: fp[c], FN: fn[c]}.Dice())
	}
	return sc, nil
}

// knownCounts sums per-(sample, class) counts of n samples ([s·C+c]) over
// the samples, leaving out each sample's unknown classes (bit c of
// unknown[s]; a sample past its end knows every class): C values each.
func knownCounts(tp, fp, fn []int64, n int, unknown []uint8) (t, f, g []int64) {
	k := len(tp) / n
	t, f, g = make([]int64, k), make([]int64, k), make([]int64, k)
	for s := 0; s < n; s++ {
		for c := 0; c < k; c++ {
			if s < len(unknown) && unknown[s]>>c&1 != 0 {
				continue
			}
			t[c] += tp[s*k+c]
			f[c] += fp[s*k+c]
			g[c] += fn[s*k+c]
		}
	}
	return t, f, g
}

// preparePatches makes the validation stream, workspace and loss.
func (v *validator) preparePatches() error {
	if v.ws != nil {
		return nil
	}
	iters := v.cfg.Iterations
	if iters == 0 {
		g := v.batch * v.job.size() // the global batch
		iters = (len(v.loader.ValCases()) + g - 1) / g
	}
	s, err := v.loader.Validation(data.StreamOptions{Iterations: iters})
	if err != nil {
		return err
	}
	ws, err := v.model.NewWorkspace(v.batch, v.patch, false)
	if err != nil {
		s.Close()
		return err
	}
	dev := v.model.Device()
	crit, err := nn.NewCriterion(dev, v.loss, ws.OutputShapes())
	if err != nil {
		s.Close()
		ws.Free()
		return err
	}
	if v.loader.Dataset().HasUnknown() {
		if err := crit.AllowUnknown(); err != nil {
			s.Close()
			ws.Free()
			crit.Free()
			return err
		}
	}
	if crit.HasBatchTerms() && v.job.size() > 1 {
		// The validation loss's batch Dice is the global batch's too, as
		// in training: every rank computes the loss of every batch.
		crit.SetBatchReducer(v.job.size(), v.job.sumDiceSums)
	}
	v.batches, v.ws, v.crit = s, ws, crit
	v.image = dev.Alloc(ws.InputShape())
	v.label = dev.Alloc(ws.LabelShape())
	return nil
}

// sliding predicts and scores the held-out cases whole (up to max_cases).
func (v *validator) sliding(ctx context.Context) (*infer.Scores, error) {
	if v.net == nil {
		net, err := infer.NewDeviceNet(v.model, v.batch, v.patch)
		if err != nil {
			return nil, err
		}
		v.net = net
	}
	cases := v.loader.ValCases()
	if m := v.cfg.MaxCases; m > 0 && m < len(cases) {
		cases = cases[:m]
	}
	all := len(cases)
	if v.job != nil {
		// Each rank scores every N-th case; the scores are gathered in
		// the cases' order below.
		cases = shareOf(cases, v.job.rank(), v.job.size())
	}
	var out []evaluation.Case
	for _, c := range cases {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		vol, err := v.loader.LoadCase(ctx, c)
		if err != nil {
			return nil, err
		}
		id := v.loader.Dataset().Cases[c].ID
		if vol.Label == nil {
			return nil, fmt.Errorf("validation case %s has no label", id)
		}
		var cs evaluation.Case
		if ds := v.loader.Dataset(); v.model.Config().MultiLabel() {
			// Sigmoid channels, scored bit by bit (regions as nnU-Net
			// scores its written segmentation).
			pred, err := infer.SegmentMultiLabel(ctx, v.net, vol, v.cfg, ds.RegionsClassOrder, ds.RegionBits)
			if err != nil {
				return nil, fmt.Errorf("validation case %s: %w", id, err)
			}
			// A class the case's crop does not annotate scores NaN.
			cs, err = infer.ScoreCaseMultiLabel(id, pred, vol, v.model.Config().NumClasses, v.cfg.HD95, v.loss.Ignore() >= 0, ds.Cases[c].Unknown)
			if err != nil {
				return nil, err
			}
		} else {
			pred, err := infer.Segment(ctx, v.net, vol, v.cfg)
			if err != nil {
				return nil, fmt.Errorf("validation case %s: %w", id, err)
			}
			if cs, err = infer.ScoreCase(id, pred, vol, v.model.Config().NumClasses, v.cfg.HD95, v.loss.Ignore()); err != nil {
				return nil, err
			}
		}
		cs.ReferenceFile = v.loader.Dataset().Cases[c].Label
		out = append(out, cs)
	}
	if v.job != nil {
		var err error
		if out, err = v.job.gatherCases(out, all); err != nil {
			return nil, fmt.Errorf("validation: %w", err)
		}
	}
	// nnU-Net's order (its pairwise means' bits depend on it); the same
	// on every rank, whatever the ranks' shares.
	evaluation.SortCases(out)
	if v.model.Config().MultiLabel() {
		// nnU-Net regions keyed as nnU-Net's validation keys them ("(1,
		// 2, 3)", "3"); a manifest's classes by channel.
		return infer.SummariseChannels(v.loader.Dataset(), v.cfg.HD95, out)
	}
	return infer.Summarise(v.model.Config().NumClasses, v.loader.Dataset().LabelNames, v.cfg.HD95, out), nil
}

func (v *validator) close() {
	if v.batches != nil {
		v.batches.Close()
	}
	if v.ws != nil {
		dev := v.model.Device()
		v.crit.Free()
		v.ws.Free()
		dev.Free(v.image)
		dev.Free(v.label)
	}
	if v.net != nil {
		v.net.Free()
	}
}
