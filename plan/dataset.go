package plan

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/voxtrain/voxtrain/data"
)

// DescribeDataset gathers what Make needs besides the fingerprint: the
// channel names from the folder's dataset.json (channel_names, else
// MSD's modality, as package data reads them; without either every
// channel is unnamed and z-scored), the class count (the largest label
// named in dataset.json or present in the fingerprint, plus one; with
// nnU-Net regions the regions, their names and regions_class_order), and
// the case count. channels is the image channel count the fingerprint was
// made with.
func DescribeDataset(ds *data.Dataset, fp *Fingerprint, channels int) (Dataset, error) {
	d := Dataset{NumTraining: len(ds.Cases), Name: filepath.Base(filepath.Clean(ds.Root))}
	names := ds.ChannelNames
	if len(names) > 0 && len(names) != channels {
		return Dataset{}, fmt.Errorf("%s: dataset.json names %d channels, the images hold %d", ds.Root, len(names), channels)
	}
	for c := range channels {
		d.ChannelNames = append(d.ChannelNames, names[c])
	}
	if err := checkDeclared(ds, fp); err != nil {
		return Dataset{}, err
	}
	top := 0 // the highest class: LabelNames never holds the ignore label
	for l := range ds.LabelNames {
		top = max(top, l)
	}
	for k := range fp.ClassFrequencies {
		if l, err := strconv.Atoi(k); err == nil && l != ds.IgnoreLabel {
			top = max(top, l)
		}
	}
	d.NumClasses = top + 1
	if ds.IgnoreLabel > 0 && len(ds.Regions) == 0 {
		// nnU-Net's ignore label: no output, left out of the loss; its
		// planner counts it among the labels.
		d.IgnoreLabel, d.Outputs = ds.IgnoreLabel, top+1
		d.NumClasses = max(top, ds.IgnoreLabel) + 1
	}
	if len(ds.Regions) > 0 {
		// The fingerprint's frequencies are of the regions' bits (package
		// data reads region labels through them): count the labels.
		d.NumClasses = 1 + len(ds.Regions)
		for _, r := range ds.Regions {
			d.Regions = append(d.Regions, r.Name)
		}
		d.RegionsClassOrder = ds.RegionsClassOrder
		if ds.IgnoreLabel > 0 {
			// Region labels read the ignore label as the multi-label
			// ignore byte (255); nnU-Net's planner counts its key too.
			d.IgnoreLabel = ds.IgnoreLabel
			d.NumClasses++
		}
	}
	return d, nil
}

// checkDeclared refuses label values the training labels hold but
// dataset.json's labels do not name (nor as its ignore label): training
// refuses them (package data's verification), and planned from the
// fingerprint they would become a class dataset.json does not know, so
// planning says so first, as nnU-Net's verify_dataset_integrity does.
func checkDeclared(ds *data.Dataset, fp *Fingerprint) error {
	if ds.LabelNames == nil {
		return nil // no dataset.json labels, or regions (read through their bits)
	}
	var extra []int
	for k, f := range fp.ClassFrequencies {
		l, err := strconv.Atoi(k)
		if err != nil || f <= 0 || l == 0 || l == ds.IgnoreLabel {
			continue
		}
		if _, ok := ds.LabelNames[l]; !ok {
			extra = append(extra, l)
		}
	}
	if len(extra) == 0 {
		return nil
	}
	slices.Sort(extra)
	named := slices.Sorted(maps.Keys(ds.LabelNames))
	return fmt.Errorf("%s: the training labels hold label values %v that dataset.json's labels do not name (they name %v): add them to dataset.json's \"labels\", or fix the label files (training would refuse them)",
		ds.Root, extra, named)
}
