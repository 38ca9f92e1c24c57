package plan

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/voxtrain/voxtrain/data"
)

// ReadFingerprint decodes a dataset_fingerprint.json: one train plan wrote,
// or nnU-Net's own (which lacks case_ids, class_frequencies and
// spacing_unit; its spacings are in the same axis order). It checks that
// the per-case lists agree and that every spacing and shape is positive.
func ReadFingerprint(r io.Reader) (*Fingerprint, error) {
	var fp Fingerprint
	if err := json.NewDecoder(r).Decode(&fp); err != nil {
		return nil, fmt.Errorf("not a dataset fingerprint: %w", err)
	}
	if err := fp.checkCases(); err != nil {
		return nil, err
	}
	if len(fp.ForegroundIntensityPropertiesPerChannel) == 0 {
		return nil, errors.New("no foreground_intensity_properties_per_channel")
	}
	for c := range len(fp.ForegroundIntensityPropertiesPerChannel) {
		if _, ok := fp.ForegroundIntensityPropertiesPerChannel[fmt.Sprint(c)]; !ok {
			return nil, fmt.Errorf("foreground_intensity_properties_per_channel has no channel %d", c)
		}
	}
	return &fp, nil
}

// checkCases checks the per-case lists: as many spacings as shapes (and
// case IDs, when named), at least one, every spacing > 0 and finite and
// every shape at least one voxel. The planner needs no more of a
// fingerprint; one read from a file must also have its channels'
// statistics (ReadFingerprint).
func (fp *Fingerprint) checkCases() error {
	n := len(fp.Spacings)
	switch {
	case n == 0:
		return fmt.Errorf("no spacings (%d spacings and %d shapes): not a dataset fingerprint", n, len(fp.ShapesAfterCrop))
	case len(fp.ShapesAfterCrop) != n:
		return fmt.Errorf("%d spacings but %d shapes_after_crop", n, len(fp.ShapesAfterCrop))
	case fp.CaseIDs != nil && len(fp.CaseIDs) != n:
		return fmt.Errorf("%d spacings but %d case_ids", n, len(fp.CaseIDs))
	}
	for i := range n {
		s, c := fp.Spacings[i], fp.ShapesAfterCrop[i]
		ok := c[0] >= 1 && c[1] >= 1 && c[2] >= 1
		for _, v := range s {
			ok = ok && v > 0 && !math.IsInf(v, 0)
		}
		if !ok {
			return fmt.Errorf("case %d: spacing %v, shape after crop %v; want both > 0", i, s, c)
		}
	}
	return nil
}

// CheckAgainst reports whether fp describes ds: as many cases (the same
// IDs, in order, when fp names them) and, where ds declares its channel
// count, as many channels.
func (fp *Fingerprint) CheckAgainst(ds *data.Dataset) error {
	if len(fp.Spacings) != len(ds.Cases) {
		return fmt.Errorf("%d cases, the dataset %s has %d", len(fp.Spacings), ds.Root, len(ds.Cases))
	}
	for i, id := range fp.CaseIDs {
		if id != ds.Cases[i].ID {
			return fmt.Errorf("case %d is %q, the dataset %s's is %q", i, id, ds.Root, ds.Cases[i].ID)
		}
	}
	if ch := len(fp.ForegroundIntensityPropertiesPerChannel); ds.Channels > 0 && ch != ds.Channels {
		return fmt.Errorf("%d channels, the dataset %s has %d", ch, ds.Root, ds.Channels)
	}
	return nil
}
