package evaluation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
)

// Dataset is what the evaluation reads of a dataset.json: the labels and
// their names, nnU-Net v2's regions where it has them, the ignore label
// and the file ending.
type Dataset struct {
	// Path is the file read (errors name it).
	Path string
	// Labels are the foreground label values, increasing: every value
	// "labels" gives but "ignore", lists unrolled, less background (0)
	// (nnU-Net's LabelManager.foreground_labels).
	Labels []int
	// Names names labels: a label's key ({"name": 1}) or, in MSD's
	// {"1": "name"}, its value. A value given under two keys takes the
	// first's name.
	Names map[int]string
	// Regions are nnU-Net v2's foreground regions
	// (LabelManager.foreground_regions), in the file's order; nil unless
	// the dataset is region-based: as LabelManager's _has_regions, some
	// label is a list of more than one entry. Then every entry but
	// "ignore" and background (0, or a list of zeros only) is a region: a
	// list one of its values, a plain value one of its label; a region
	// given twice (the same key) is kept once, as nnU-Net's summary
	// holds it (DatasetRegions keeps both, one output channel each).
	Regions []Region
	// RegionsClassOrder is "regions_class_order" (the label value each
	// region paints in a prediction), one per region, which nnU-Net
	// requires of a region-based dataset.
	RegionsClassOrder []int
	// Ending is "file_ending" ("" when absent).
	Ending string
	// Ignore is the "ignore" label (0: none).
	Ignore int
}

// ReadDataset reads a dataset.json's labels (MSD's {"1": "name"} or
// nnU-Net v2's {"name": 1}, whose values may be lists: regions), ignore
// label and file ending. Errors name the file and the key.
func ReadDataset(path string) (*Dataset, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m struct {
		Labels            json.RawMessage `json:"labels"`
		FileEnding        string          `json:"file_ending"`
		RegionsClassOrder json.RawMessage `json:"regions_class_order"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	entries, err := orderedObject(m.Labels)
	if err != nil {
		return nil, fmt.Errorf("parse %s: labels: %w", path, err)
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("%s: no \"labels\"", path)
	}
	values, ignore, err := labelEntries(entries)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	d := &Dataset{Path: path, Names: map[int]string{}, Ending: m.FileEnding, Ignore: ignore}
	present := map[int]bool{}
	for _, v := range values {
		for _, l := range v.vals {
			if l > 0 && !present[l] {
				present[l] = true
				d.Labels = append(d.Labels, l)
			}
		}
		if len(v.vals) == 1 && v.vals[0] > 0 && d.Names[v.vals[0]] == "" {
			d.Names[v.vals[0]] = v.name
		}
	}
	sort.Ints(d.Labels)
	all, order, err := regionsOf(values, m.RegionsClassOrder)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	seen := map[string]bool{}
	for _, r := range all {
		if !seen[r.Key()] {
			seen[r.Key()] = true // nnU-Net's result dict holds one entry per key
			d.Regions = append(d.Regions, r)
		}
	}
	d.RegionsClassOrder = order
	return d, nil
}

// labelEntry is one entry of "labels" but "ignore": its name and label
// values, list when dataset.json gives a list.
type labelEntry struct {
	name string
	vals []int
	list bool
}

// labelEntries reads the entries of "labels" (MSD's "1": "name" as label
// 1 named so) and its "ignore" label (0: none). Errors start "labels:".
func labelEntries(entries []entry) (values []labelEntry, ignore int, err error) {
	for _, e := range entries {
		k := e.key
		if strings.EqualFold(k, "ignore") {
			var l int
			if json.Unmarshal(e.raw, &l) != nil || l < 1 || l > 255 {
				return nil, 0, fmt.Errorf("labels: %q is %s, want nnU-Net v2's ignore label, an integer in 1..255 (not a region)", k, e.raw)
			}
			ignore = l // not a class
			continue
		}
		var name string
		if i, err := strconv.Atoi(k); err == nil && json.Unmarshal(e.raw, &name) == nil {
			values = append(values, labelEntry{name: name, vals: []int{i}}) // MSD: "1": "name"
			continue
		}
		vals, list, err := labelValues(e.raw)
		if err != nil {
			return nil, 0, fmt.Errorf("labels: %q: %w", k, err)
		}
		values = append(values, labelEntry{name: k, vals: vals, list: list})
	}
	return values, ignore, nil
}

// regionBased is nnU-Net v2's rule for a region-based dataset
// (LabelManager's _has_regions): some label is a list of more than one
// entry. Lists of one entry only ("core": [2]) are plain labels.
func regionBased(values []labelEntry) bool {
	for _, v := range values {
		if v.list && len(v.vals) > 1 {
			return true
		}
	}
	return false
}

// regionsOf returns the regions of a region-based dataset (nil, nil
// otherwise, regions_class_order then unread, as nnU-Net ignores it) as
// LabelManager's foreground_regions: every entry but background (0, or
// a list of zeros only) in the file's order, repeats kept, a list one of
// its values, a plain value one of its label; and regions_class_order,
// one label value per region, which nnU-Net requires. Errors start
// "labels:" or "regions_class_order:".
func regionsOf(values []labelEntry, classOrder json.RawMessage) ([]Region, []int, error) {
	if !regionBased(values) {
		return nil, nil, nil
	}
	var regions []Region
	for _, v := range values {
		bg := true
		for _, l := range v.vals {
			bg = bg && l == 0
		}
		if bg {
			continue // background is no region
		}
		regions = append(regions, Region{Labels: v.vals, Scalar: !v.list, Name: v.name})
	}
	if len(classOrder) == 0 || string(classOrder) == "null" {
		return nil, nil, fmt.Errorf("labels: %s, nnU-Net v2 regions, but there is no \"regions_class_order\" (the label value each region paints in a prediction), which nnU-Net requires of regions; add it", regionList(regions))
	}
	var order []int
	if err := json.Unmarshal(classOrder, &order); err != nil {
		return nil, nil, fmt.Errorf("regions_class_order: %s, want a list of label values", classOrder)
	}
	if len(order) != len(regions) {
		return nil, nil, fmt.Errorf("regions_class_order: %d values for the %d regions of labels (every entry but background and ignore)", len(order), len(regions))
	}
	return regions, order, nil
}

// DatasetRegions reads nnU-Net v2's regions from a dataset.json's
// "labels" object and "regions_class_order" (raw JSON; either may be
// empty) as nnU-Net's LabelManager does, so that training and evaluation
// read a dataset.json alike: nil, nil unless some label is a list of
// more than one entry; then every entry but "ignore" and background, in
// the file's order and repeats kept (one output channel each), and
// regions_class_order, one value per region. Errors start "labels:" or
// "regions_class_order:"; the caller names the file.
func DatasetRegions(labels, regionsClassOrder json.RawMessage) ([]Region, []int, error) {
	entries, err := orderedObject(labels)
	if err != nil {
		return nil, nil, fmt.Errorf("labels: %w", err)
	}
	values, _, err := labelEntries(entries)
	if err != nil {
		return nil, nil, err
	}
	return regionsOf(values, regionsClassOrder)
}

// regionList names the first list-valued regions, for errors.
func regionList(rs []Region) string {
	var parts []string
	for _, r := range rs {
		if !r.Scalar {
			parts = append(parts, fmt.Sprintf("%q is %s", r.Name, r.Key()))
		}
	}
	if len(parts) > 3 {
		parts = append(parts[:3], "…")
	}
	return strings.Join(parts, ", ")
}

// labelValues reads one "labels" value: an integer label, or a list of
// them (a region); each in 0..255, the values a uint8 label map holds.
func labelValues(raw json.RawMessage) (vals []int, list bool, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '[' {
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, false, fmt.Errorf("%s: want a label value or a list of them", raw)
		}
		if len(items) == 0 {
			return nil, false, fmt.Errorf("an empty region, want a list of label values")
		}
		for _, it := range items {
			var l int
			if json.Unmarshal(it, &l) != nil {
				return nil, false, fmt.Errorf("region %s: %s is not a label value (an integer in 0..255)", raw, it)
			}
			if l < 0 || l > 255 {
				return nil, false, fmt.Errorf("region %s: %d is not a label value, want 0..255", raw, l)
			}
			vals = append(vals, l)
		}
		return vals, true, nil
	}
	var l int
	if json.Unmarshal(raw, &l) != nil {
		return nil, false, fmt.Errorf("%s is not a label value (an integer, or a list of them for a region)", raw)
	}
	if l < 0 || l > 255 {
		return nil, false, fmt.Errorf("%d is not a label value, want 0..255", l)
	}
	return []int{l}, false, nil
}

// entry is one key of a JSON object and its value.
type entry struct {
	key string
	raw json.RawMessage
}

// orderedObject returns an object's entries in the file's order, which
// nnU-Net's regions follow (Python's dicts keep it). A repeated key keeps
// its first place and takes the last value, as Python's json.load does.
func orderedObject(b json.RawMessage) ([]entry, error) {
	if len(b) == 0 || string(b) == "null" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("want an object")
	}
	var out []entry
	at := map[string]int{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := t.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		if i, ok := at[k]; ok {
			out[i].raw = raw
			continue
		}
		at[k] = len(out)
		out = append(out, entry{key: k, raw: raw})
	}
	return out, nil
}

// DatasetLabels reads the foreground labels and their names from a
// dataset.json (MSD's {"1": "name"} or nnU-Net v2's {"name": 1}) and its
// file_ending ("" when absent). A region-based dataset.json is refused
// (ReadDataset reads its regions): its callers score labels only.
func DatasetLabels(path string) (labels []int, names map[int]string, ending string, err error) {
	d, err := ReadDataset(path)
	if err != nil {
		return nil, nil, "", err
	}
	if d.Regions != nil {
		return nil, nil, "", fmt.Errorf("%s: labels: %s: nnU-Net v2 regions, but only plain labels are read here", path, regionList(d.Regions))
	}
	return d.Labels, d.Names, d.Ending, nil
}

// DatasetIgnore returns the ignore label of a dataset.json (nnU-Net v2's
// "ignore": N), 0 when it has none.
func DatasetIgnore(path string) (int, error) {
	d, err := ReadDataset(path)
	if err != nil {
		return 0, err
	}
	return d.Ignore, nil
}
