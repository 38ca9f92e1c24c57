// Package nnunet reads what nnU-Net v2 trained: a trained-model folder
// (nnUNet_results/DATASET/TRAINER__PLANS__CONFIGURATION, holding
// plans.json, dataset.json, dataset_fingerprint.json and
// fold_<k>/checkpoint_final.pth) and the PlainConvUNet weights in its
// checkpoints, renamed to voxtrain's state_dict names and with every
// kernel's axes put back into the files' (D, H, W) order: nnU-Net's
// network runs on arrays transposed by the plans' transpose_forward,
// voxtrain's on the files' own axes (see plan.YAML, which writes the
// configuration the same way).
package nnunet

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/voxtrain/voxtrain/checkpoint"
	"github.com/voxtrain/voxtrain/checkpoint/safetensors"
	"github.com/voxtrain/voxtrain/evaluation"
	"github.com/voxtrain/voxtrain/nn"
	"github.com/voxtrain/voxtrain/plan"
	"github.com/voxtrain/voxtrain/volume"
)

// Model is a trained-model folder's description.
type Model struct {
	Dir string
	// Trainer, PlansName and Configuration are the folder name's three
	// parts (nnUNetTrainer__nnUNetPlans__3d_fullres).
	Trainer, PlansName, Configuration string
	Plans                             *plan.Plans
	Fingerprint                       *plan.Fingerprint
	Dataset                           plan.Dataset
	// Folds are the folds with a checkpoint_final.pth (-1: fold_all).
	Folds []int
}

// ReadModel reads the trained-model folder dir; configuration ("": the
// folder name's) names the plans' configuration it trained.
func ReadModel(dir, configuration string) (*Model, error) {
	m := &Model{Dir: dir}
	parts := strings.Split(filepath.Base(filepath.Clean(dir)), "__")
	if len(parts) == 3 {
		m.Trainer, m.PlansName, m.Configuration = parts[0], parts[1], parts[2]
	}
	if configuration != "" {
		m.Configuration = configuration
	}
	if m.Configuration == "" {
		return nil, fmt.Errorf("%s: not named TRAINER__PLANS__CONFIGURATION as nnU-Net names its trained-model folders: give the configuration", dir)
	}
	m.Plans = &plan.Plans{}
	if err := readJSON(filepath.Join(dir, "plans.json"), m.Plans); err != nil {
		return nil, err
	}
	c := m.Plans.Configurations[m.Configuration]
	if c == nil {
		var names []string
		for n := range m.Plans.Configurations {
			names = append(names, n)
		}
		slices.Sort(names)
		return nil, fmt.Errorf("%s: plans.json has no configuration %q (it has %s)", dir, m.Configuration, strings.Join(names, ", "))
	}
	if c.InheritsFrom != "" || c.PreviousStage != "" {
		return nil, fmt.Errorf("%s: %s is a cascade stage (previous_stage %q): voxtrain has no cascade", dir, m.Configuration, c.PreviousStage)
	}
	if a := c.Architecture; !a.Plain() && !a.Residual() {
		return nil, fmt.Errorf("%s: %s's network is %s: voxtrain builds nnU-Net's PlainConvUNet and ResidualEncoderUNet only", dir, m.Configuration, a.NetworkClassName)
	}
	if n := len(m.Plans.TransposeForward); n != 3 || !isPermutation(m.Plans.TransposeForward) {
		return nil, fmt.Errorf("%s: plans.json's transpose_forward %v is not a permutation of 3 axes", dir, m.Plans.TransposeForward)
	}
	m.Fingerprint = &plan.Fingerprint{}
	if err := readJSON(filepath.Join(dir, "dataset_fingerprint.json"), m.Fingerprint); err != nil {
		return nil, err
	}
	ds, err := readDataset(filepath.Join(dir, "dataset.json"))
	if err != nil {
		return nil, err
	}
	ds.Name = m.Plans.DatasetName
	m.Dataset = ds
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		k, ok := checkpoint.ParseFoldDir(e.Name()) // nnU-Net names its folds as voxtrain does
		if !ok || !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, e.Name(), "checkpoint_final.pth")); err == nil {
			m.Folds = append(m.Folds, k)
		}
	}
	slices.Sort(m.Folds)
	if len(m.Folds) == 0 {
		return nil, fmt.Errorf("%s: no fold_<k>/checkpoint_final.pth (train the folds to their end first)", dir)
	}
	return m, nil
}

// Checkpoint is fold's checkpoint_final.pth (-1: fold_all).
func (m *Model) Checkpoint(fold int) string {
	return filepath.Join(m.Dir, checkpoint.FoldDir(fold), "checkpoint_final.pth")
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// readDataset reads what the plans need of dataset.json: the channels'
// names, the number of classes (background included; the labels read as
// evaluation.ReadDataset reads them; with nnU-Net regions the regions
// and regions_class_order, which voxtrain trains as multi-label targets
// with one sigmoid output per region, as nnU-Net's heads) and of training
// cases.
func readDataset(path string) (plan.Dataset, error) {
	var d struct {
		ChannelNames map[string]string `json:"channel_names"`
		Modality     map[string]string `json:"modality"`
		NumTraining  int               `json:"numTraining"`
	}
	if err := readJSON(path, &d); err != nil {
		return plan.Dataset{}, err
	}
	names := d.ChannelNames
	if names == nil {
		names = d.Modality
	}
	out := plan.Dataset{NumTraining: d.NumTraining}
	for i := 0; i < len(names); i++ {
		n, ok := names[strconv.Itoa(i)]
		if !ok {
			return plan.Dataset{}, fmt.Errorf("%s: channel_names lacks channel %d", path, i)
		}
		out.ChannelNames = append(out.ChannelNames, n)
	}
	if len(out.ChannelNames) == 0 {
		return plan.Dataset{}, fmt.Errorf("%s: no channel_names", path)
	}
	labels, err := evaluation.ReadDataset(path)
	if err != nil {
		return plan.Dataset{}, err
	}
	if len(labels.Regions) > 0 {
		// Region-based: one sigmoid head per region (nnU-Net's
		// num_segmentation_heads), voxtrain's multi-label targets.
		for _, r := range labels.Regions {
			out.Regions = append(out.Regions, r.Name)
		}
		out.RegionsClassOrder = labels.RegionsClassOrder
		out.NumClasses = 1 + len(labels.Regions)
		if labels.Ignore > 0 {
			// Read as the multi-label ignore byte, as package data reads it.
			out.IgnoreLabel = volume.IgnoreByte
		}
		return out, nil
	}
	if len(labels.Labels) == 0 {
		return plan.Dataset{}, fmt.Errorf("%s: no foreground label", path)
	}
	out.NumClasses = slices.Max(labels.Labels) + 1
	if labels.Ignore > 0 {
		// nnU-Net's ignore label: no output; the config's loss leaves it
		// out. NumClasses counts it, as plan.DescribeDataset's (the
		// planner's label count); Outputs are the network's classes.
		out.IgnoreLabel, out.Outputs = labels.Ignore, out.NumClasses
		out.NumClasses = max(out.NumClasses, labels.Ignore+1)
	}
	return out, nil
}

func isPermutation(p []int) bool {
	seen := make([]bool, len(p))
	for _, a := range p {
		if a < 0 || a >= len(p) || seen[a] {
			return false
		}
		seen[a] = true
	}
	return true
}

// nnU-Net's PlainConvUNet and ResidualEncoderUNet state_dict names
// (dynamic_network_architectures): each conv block's conv and norm appear
// twice (as .conv/.norm and in .all_modules), and the decoder holds the
// encoder again (decoder.encoder.*). A residual encoder has a stem and
// blocks whose skip is skip.0 (1×1×1 conv and norm) or, after an average
// pool, skip.1.
var (
	stemKey = regexp.MustCompile(`^encoder\.stem\.convs\.0\.(conv|norm)\.(weight|bias)$`)
	resKey  = regexp.MustCompile(`^encoder\.stages\.(\d+)\.blocks\.(\d+)\.(conv1|conv2)\.(conv|norm)\.(weight|bias)$`)
	projKey = regexp.MustCompile(`^encoder\.stages\.(\d+)\.blocks\.(\d+)\.skip\.[01]\.(conv|norm)\.(weight|bias)$`)
	encKey  = regexp.MustCompile(`^encoder\.stages\.(\d+)\.0\.convs\.(\d+)\.(conv|norm)\.(weight|bias)$`)
	decKey  = regexp.MustCompile(`^decoder\.stages\.(\d+)\.convs\.(\d+)\.(conv|norm)\.(weight|bias)$`)
	upKey   = regexp.MustCompile(`^decoder\.transpconvs\.(\d+)\.(weight|bias)$`)
	segKey  = regexp.MustCompile(`^decoder\.seg_layers\.(\d+)\.(weight|bias)$`)
	skipKey = regexp.MustCompile(`(^decoder\.encoder\.|\.all_modules\.)`)
)

// Weights renames a PlainConvUNet or ResidualEncoderUNet state_dict of
// stages encoder stages to voxtrain's names (nn.UNet's: enc.L.K.0/1, or
// stem.0/1 and enc.L.K.conv1/conv2/skip.0/1 for a residual encoder, up.D,
// dec.D.K.0/1, head, ds.D), converts it to float32 and permutes every kernel's three spatial
// axes by transposeBackward (the plans' transpose_backward), so that a
// kernel over nnU-Net's transposed axes becomes the same kernel over the
// files' axes (a 2d configuration's 2-D kernels first become 3-D ones of
// depth 1 across the slices). The deep-supervision heads are kept (ds.D) when deepSup,
// else left out. A tensor it does not know is an error naming it.
func Weights(ts []safetensors.Tensor, stages int, transposeBackward []int, deepSup bool) (map[string]nn.HostTensor, error) {
	if stages < 1 {
		return nil, errors.New("nnunet: no stages")
	}
	out := map[string]nn.HostTensor{}
	for _, t := range ts {
		// A compiled or DDP-wrapped network's names (nnU-Net strips these
		// prefixes on load too).
		t.Name = strings.TrimPrefix(strings.TrimPrefix(t.Name, "module."), "_orig_mod.")
		var name string
		switch {
		case skipKey.MatchString(t.Name):
			continue
		case stemKey.MatchString(t.Name):
			m := stemKey.FindStringSubmatch(t.Name)
			name = fmt.Sprintf("stem.%s.%s", layer(m[1]), m[2])
		case resKey.MatchString(t.Name):
			m := resKey.FindStringSubmatch(t.Name)
			name = fmt.Sprintf("enc.%s.%s.%s.%s.%s", m[1], m[2], m[3], layer(m[4]), m[5])
		case projKey.MatchString(t.Name):
			m := projKey.FindStringSubmatch(t.Name)
			name = fmt.Sprintf("enc.%s.%s.skip.%s.%s", m[1], m[2], layer(m[3]), m[4])
		case encKey.MatchString(t.Name):
			m := encKey.FindStringSubmatch(t.Name)
			name = fmt.Sprintf("enc.%s.%s.%s.%s", m[1], m[2], layer(m[3]), m[4])
		case decKey.MatchString(t.Name):
			m := decKey.FindStringSubmatch(t.Name)
			name = fmt.Sprintf("dec.%s.%s.%s.%s", m[1], m[2], layer(m[3]), m[4])
		case upKey.MatchString(t.Name):
			m := upKey.FindStringSubmatch(t.Name)
			name = fmt.Sprintf("up.%s.%s", m[1], m[2])
		case segKey.MatchString(t.Name):
			m := segKey.FindStringSubmatch(t.Name)
			d, _ := strconv.Atoi(m[1])
			switch {
			case d == stages-2:
				name = "head." + m[2]
			case d < stages-2 && deepSup:
				name = fmt.Sprintf("ds.%d.%s", d, m[2])
			case d < stages-2:
				continue
			default:
				return nil, fmt.Errorf("nnunet: %s: a segmentation layer past the %d decoder stages", t.Name, stages-1)
			}
		default:
			return nil, fmt.Errorf("nnunet: %s is not a PlainConvUNet or ResidualEncoderUNet weight voxtrain maps", t.Name)
		}
		v, err := t.Float32s()
		if err != nil {
			return nil, fmt.Errorf("nnunet: %s: %w", t.Name, err)
		}
		shape := slices.Clone(t.Shape)
		if len(shape) == 4 {
			// A 2d configuration's kernel, over nnU-Net's transposed axes 1
			// and 2: the same kernel, one voxel deep across the slices
			// (transposed axis 0), is voxtrain's 2d network's (plan.YAML).
			shape = []int{shape[0], shape[1], 1, shape[2], shape[3]}
		}
		if len(shape) == 5 {
			v, shape = permuteKernel(v, shape, transposeBackward)
		}
		out[name] = nn.HostTensor{Name: name, Shape: nn.Shape(shape), Data: v}
	}
	return out, nil
}

func layer(kind string) string {
	if kind == "conv" {
		return "0"
	}
	return "1"
}

// permuteKernel reorders a 5-D tensor's (A, B, k0, k1, k2) spatial axes:
// axis j of the result is axis perm[j] of the input.
func permuteKernel(v []float32, shape []int, perm []int) ([]float32, []int) {
	k := shape[2:]
	nk := [3]int{k[perm[0]], k[perm[1]], k[perm[2]]}
	ab := shape[0] * shape[1]
	n := k[0] * k[1] * k[2]
	out := make([]float32, len(v))
	inStride := [3]int{k[1] * k[2], k[2], 1}
	for c := 0; c < ab; c++ {
		src, dst := v[c*n:(c+1)*n], out[c*n:(c+1)*n]
		i := 0
		for a := 0; a < nk[0]; a++ {
			for b := 0; b < nk[1]; b++ {
				for e := 0; e < nk[2]; e++ {
					var idx [3]int
					idx[perm[0]], idx[perm[1]], idx[perm[2]] = a, b, e
					dst[i] = src[idx[0]*inStride[0]+idx[1]*inStride[1]+idx[2]*inStride[2]]
					i++
				}
			}
		}
	}
	return out, []int{shape[0], shape[1], nk[0], nk[1], nk[2]}
}
