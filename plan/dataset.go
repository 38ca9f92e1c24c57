package plan

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/voxtrain/voxtrain/data"
)

// meta is what the planner reads of a dataset.json beyond what package
// data keeps: the channel names, which choose the normalisation.
type meta struct {
	Name         string            `json:"name"`
	Modality     map[string]string `json:"modality"`      // MSD, nnU-Net v1
	ChannelNames map[string]string `json:"channel_names"` // nnU-Net v2
}

// DescribeDataset gathers what Make needs besides the fingerprint: the
// channel names from the folder's dataset.json (channel_names, else
// MSD's modality; without either every channel is unnamed and z-scored),
// the class count (the largest label named in dataset.json or present in
// the fingerprint, plus one), and the case count. channels is the image
// channel count the fingerprint was made with.
func DescribeDataset(ds *data.Dataset, fp *Fingerprint, channels int) (Dataset, error) {
	d := Dataset{NumTraining: len(ds.Cases), Name: filepath.Base(filepath.Clean(ds.Root))}
	var m meta
	if ds.Root != "" {
		path := filepath.Join(ds.Root, "dataset.json")
		b, err := os.ReadFile(path)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return Dataset{}, fmt.Errorf("read %s: %w", path, err)
		default:
			if err := json.Unmarshal(b, &m); err != nil {
				return Dataset{}, fmt.Errorf("parse %s: %w", path, err)
			}
		}
	}
	names := m.ChannelNames
	if len(names) == 0 {
		names = m.Modality
	}
	if len(names) > 0 && len(names) != channels {
		return Dataset{}, fmt.Errorf("%s: dataset.json names %d channels, the images hold %d", ds.Root, len(names), channels)
	}
	for c := range channels {
		d.ChannelNames = append(d.ChannelNames, names[strconv.Itoa(c)])
	}
	top := 0
	for l := range ds.LabelNames {
		top = max(top, l)
	}
	for k := range fp.ClassFrequencies {
		if l, err := strconv.Atoi(k); err == nil {
			top = max(top, l)
		}
	}
	d.NumClasses = top + 1
	return d, nil
}
