package infer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/preprocess"
)

// Ensemble predicts with one or more models (the folds of a cross-
// validation, or any checkpoints of one task) by averaging their class
// probabilities: the softmax of each member's sliding-window logits (the
// sigmoid for a one-channel model), then argmax of the mean.
//
// nnUNetv2_predict averages the members' logits across folds and applies
// the softmax once; nnUNetv2_ensemble, which combines separately saved
// predictions, averages probabilities. We average probabilities, as the
// issue asks: it is the mean of what each member would report on its own
// (the .npz a single member writes), so an ensemble's saved probabilities
// are comparable with its members' and with nnUNetv2_ensemble's, and one
// overconfident member (large logits) cannot outvote the others as it can
// in a mean of logits. The two agree wherever the members agree.
type Ensemble struct {
	Members []*Model
	// Classes is the members' output channels, Channels their input
	// channels; Data the preprocessing they share (the first member's
	// data section).
	Classes, Channels int
	Data              config.Data
	// MultiLabel is model.targets multi_label (sigmoid channels), and
	// RegionsClassOrder the training dataset.json's regions_class_order
	// for nnU-Net regions (nil: bit-packed labels); see MultiLabelLabels.
	MultiLabel        bool
	RegionsClassOrder []int
}

// NewEnsemble checks that the models can be averaged, that is that they
// agree on the classes, the input channels and the preprocessing
// (normalisation, its ct statistics and the target spacing, with its unit
// where both record one: one that does not takes the other's), and returns
// their ensemble. A disagreement is an error naming both checkpoints and
// what differs.
func NewEnsemble(models []*Model) (*Ensemble, error) {
	if len(models) == 0 {
		return nil, errors.New("ensemble: no checkpoint")
	}
	first := models[0]
	e := &Ensemble{Members: models, Classes: first.Config.Model.NumClasses, Channels: first.Config.Model.InChannels,
		Data: first.Config.Data}
	spec0, err := specJSON(first.Config.Data)
	if err != nil {
		return nil, err
	}
	for _, m := range models[1:] {
		mc := m.Config.Model
		var what string
		switch spec, err := specJSON(m.Config.Data); {
		case err != nil:
			return nil, err
		case mc.NumClasses != e.Classes:
			what = fmt.Sprintf("%d classes (model.num_classes), %s has %d", mc.NumClasses, first.Dir, e.Classes)
		case mc.MultiLabel() != first.Config.Model.MultiLabel():
			what = fmt.Sprintf("model.targets %s, %s has %s", cmpOr(mc.Targets), first.Dir, cmpOr(first.Config.Model.Targets))
		case !slices.Equal(mc.RegionsClassOrder, first.Config.Model.RegionsClassOrder):
			what = fmt.Sprintf("model.regions_class_order %v, %s has %v", mc.RegionsClassOrder, first.Dir, first.Config.Model.RegionsClassOrder)
		case mc.InChannels != e.Channels:
			what = fmt.Sprintf("%d input channels (model.in_channels), %s has %d", mc.InChannels, first.Dir, e.Channels)
		case spec != spec0:
			what = fmt.Sprintf("the preprocessing %s, %s has %s", spec, first.Dir, spec0)
		case e.Data.Target() != nil && m.Config.Data.TargetUnit() != "" && e.Data.TargetUnit() != "" && m.Config.Data.TargetUnit() != e.Data.TargetUnit():
			what = fmt.Sprintf("data.target_spacing %v in %s (data.spacing_unit), %s has it in %s", m.Config.Data.TargetSpacing, m.Config.Data.TargetUnit(), first.Dir, e.Data.TargetUnit())
		}
		if what != "" {
			return nil, fmt.Errorf("checkpoints %s and %s cannot be ensembled: %s has %s", first.Dir, m.Dir, m.Dir, what)
		}
		// A member that records the target's unit tells it for one that
		// does not (a checkpoint from before spacing_unit).
		if e.Data.SpacingUnit == "" {
			e.Data.SpacingUnit = m.Config.Data.SpacingUnit
		}
	}
	if e.MultiLabel = first.Config.Model.MultiLabel(); e.MultiLabel {
		if e.RegionsClassOrder, err = regionsClassOrder(first); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// regionsClassOrder is a multi-label model's regions_class_order, in
// which nnU-Net regions paint their label values (nil: per-class labels,
// bit-packed): the checkpoint's config carries it (the trainer copies it
// there); checkpoints from before read the training dataset.json.
func regionsClassOrder(m *Model) ([]int, error) {
	if o := m.Config.Model.RegionsClassOrder; o != nil {
		return o, nil
	}
	if d := m.Config.Data; d.Manifest == "" && d.Dataset != "" {
		order, err := data.RegionsClassOrder(d.Dataset)
		if err != nil {
			return nil, fmt.Errorf("checkpoint %s: its regions_class_order (model.targets multi_label): %w", m.Dir, err)
		}
		return order, nil
	}
	return nil, nil
}

// cmpOr is a model.targets value as written, softmax for the default "".
func cmpOr(t string) string {
	if t == "" {
		return config.TargetsSoftmax
	}
	return t
}

// specJSON is the preprocessing of a data section as JSON, the form in
// which two members' are compared (and reported when they differ).
func specJSON(d config.Data) (string, error) {
	spec := preprocess.SpecOf(d)
	spec.FGSamples = 0 // the training crops' business, not inference's
	b, err := json.Marshal(spec)
	return string(b), err
}

// ReadCase reads and preprocesses case c as the members were trained.
func (e *Ensemble) ReadCase(c data.Case) (*data.Volume, error) {
	return data.ReadCase(e.Data, c, e.Channels)
}

// mean averages the members' probabilities, each from member(m); an
// error names the member's checkpoint when there are several.
func (e *Ensemble) mean(member func(m *Model) ([]float32, error)) ([]float32, error) {
	var sum []float32
	for i, m := range e.Members {
		p, err := member(m)
		if err != nil {
			if len(e.Members) > 1 {
				err = fmt.Errorf("%s: %w", m.Dir, err)
			}
			return nil, err
		}
		if i == 0 {
			sum = p
			continue
		}
		for j, x := range p {
			sum[j] += x
		}
	}
	if k := len(e.Members); k > 1 {
		inv := 1 / float32(k)
		for j := range sum {
			sum[j] *= inv
		}
	}
	return sum, nil
}

// Labels returns the label map of probabilities probs over n voxels:
// argmax over the classes, or probability > 0.5 for a one-channel
// (sigmoid) model, the threshold Segment applies to its logit at 0, or
// MultiLabelLabels for a multi-label one.
func (e *Ensemble) Labels(probs []float32, n int) []uint8 {
	return ProbabilityLabels(probs, e.Classes, n, e.MultiLabel, e.RegionsClassOrder)
}

// ProbabilityLabels returns the label map of probabilities probs, classes
// channels of n voxels (channel-major), as predict makes it: for softmax
// models argmax over the classes, or probability > 0.5 for one channel;
// for multi-label (sigmoid) models MultiLabelLabels, painting
// regions_class_order (order) for nnU-Net regions, else bit-packed. It is
// what turns saved probabilities back into labels (train ensemble, as
// nnU-Net's LabelManager.convert_probabilities_to_segmentation).
func ProbabilityLabels(probs []float32, classes, n int, multiLabel bool, order []int) []uint8 {
	if multiLabel {
		return MultiLabelLabels(probs, classes, n, order)
	}
	if classes == 1 {
		out := make([]uint8, n)
		for i, p := range probs[:n] {
			if p > 0.5 {
				out[i] = 1
			}
		}
		return out
	}
	return Argmax(probs, classes, n)
}

// Probabilities returns m's class probabilities on v's grid: the softmax
// over the classes of the sliding-window logits (the sigmoid of the one
// channel of a one-class model), channel-major.
func (m *Model) Probabilities(ctx context.Context, v *data.Volume, vc config.Validation) ([]float32, error) {
	logits, err := m.logits(ctx, v, vc)
	if err != nil {
		return nil, err
	}
	m.activate(logits, m.dnet.outC, v.Shape[0]*v.Shape[1]*v.Shape[2])
	return logits, nil
}

// logits returns m's sliding-window logits on v's grid: outC channels of
// D·H·W values (channel-major), mirrored (vc.Mirror) and overlapped as
// vc says.
func (m *Model) logits(ctx context.Context, v *data.Volume, vc config.Validation) ([]float32, error) {
	net := m.dnet
	if len(v.Image) != net.inC {
		return nil, fmt.Errorf("the model takes %d channels, the volume has %d", net.inC, len(v.Image))
	}
	w := Window{Patch: net.patch, Overlap: vc.Overlap, BatchSize: net.batch}
	if vc.Mirror {
		w.MirrorAxes = mirrorAxes(net.patch)
	}
	return Predict(ctx, net, v.Image, v.Shape, net.outC, w)
}

// Softmax turns c channels of n logits each (channel-major) into
// probabilities in place: the softmax over the channels per voxel, or the
// sigmoid when c is 1.
func Softmax(x []float32, c, n int) {
	if c == 1 {
		for i, z := range x[:n] {
			x[i] = float32(1 / (1 + math.Exp(-float64(z))))
		}
		return
	}
	for i := 0; i < n; i++ {
		mx := x[i]
		for k := 1; k < c; k++ {
			mx = max(mx, x[k*n+i])
		}
		var s float64
		for k := 0; k < c; k++ {
			e := math.Exp(float64(x[k*n+i] - mx))
			x[k*n+i] = float32(e)
			s += e
		}
		inv := 1 / s
		for k := 0; k < c; k++ {
			x[k*n+i] = float32(float64(x[k*n+i]) * inv)
		}
	}
}
