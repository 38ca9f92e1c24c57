package data

import (
	"fmt"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/volume"
)

// SameUnit returns the spatial unit the cases of ds are in (volume.Header
// .Unit's spelling; "" when none states one), given units[i], what case
// i's first image states (Volume.Unit). Spacings are numbers compared
// across cases — a plan's median spacing, and data.target_spacing, to
// which every case is resampled in its own unit — so cases in different
// units are refused: the error names the first case that differs and the
// first that states a unit, their first images and units, and says to
// write the cases in one unit. A case that states no unit is taken to be
// in the others' (a file written before its format carried units, a
// MetaImage). A stated unit that is not a length is refused beside
// another stated one (volume.UnitScale).
func SameUnit(ds *Dataset, units []string) (string, error) {
	first, err := sameUnit(ds, units)
	if err != nil || first < 0 {
		return "", err
	}
	return units[first], nil
}

// sameUnit is SameUnit giving the index of the first case that states a
// unit (-1: none does).
func sameUnit(ds *Dataset, units []string) (int, error) {
	first := -1
	for i, u := range units {
		if u == "" {
			continue
		}
		if first < 0 {
			first = i
			continue
		}
		c, fc := ds.Cases[i], ds.Cases[first]
		if f, err := volume.UnitScale(u, units[first]); err != nil {
			return -1, fmt.Errorf("data: case %s (%s): %w", c.ID, c.Images[0], err)
		} else if f != 1 {
			return -1, fmt.Errorf("data: case %s (%s) is in %s, case %s (%s) in %s: spacings compared across cases (a plan's median spacing, data.target_spacing) would mix units; write the cases in one unit",
				c.ID, c.Images[0], u, fc.ID, fc.Images[0], units[first])
		}
	}
	return first, nil
}

// DatasetUnit reads the header of every case's first image and returns
// SameUnit's unit of ds, or its error. Only headers are read (a NIfTI
// file's first bytes, a Zarr store's metadata).
func DatasetUnit(ds *Dataset) (string, error) {
	u, _, err := datasetUnit(ds)
	return u, err
}

// datasetUnit is DatasetUnit with the first case that states the unit
// (-1: none does).
func datasetUnit(ds *Dataset) (string, int, error) {
	units := make([]string, len(ds.Cases))
	// A manifest's crops share their raw: its header is read once, not
	// once per crop (metadata requests over http).
	read := map[string]string{}
	for i, c := range ds.Cases {
		u, ok := read[c.Images[0]]
		if !ok {
			f, err := volume.Open(c.Images[0])
			if err != nil {
				return "", -1, fmt.Errorf("data: case %s: %w", c.ID, err)
			}
			u = f.Header().Unit
			f.Close()
			read[c.Images[0]] = u
		}
		units[i] = u
	}
	first, err := sameUnit(ds, units)
	if err != nil || first < 0 {
		return "", -1, err
	}
	return units[first], first, nil
}

// checkTargetUnit refuses, when cfg resamples to data.target_spacing,
// a dataset whose cases are in different units (DatasetUnit): each case
// would be resampled to the same numbers in its own unit. With
// data.spacing_unit set it refuses cases in another unit than that one
// too, rather than converting the target per case: the prepared store,
// its fingerprint and a manifest's levels all take target_spacing as
// numbers in the cases' unit, and a dataset in one unit is what train
// plan writes spacing_unit from. Setup, Prepare and Open call it before
// they read voxels.
func checkTargetUnit(cfg config.Data, ds *Dataset) error {
	if cfg.Target() == nil {
		return nil
	}
	u, first, err := datasetUnit(ds)
	if err != nil {
		return fmt.Errorf("%w (data.target_spacing %v resamples every case to one voxel size)", err, cfg.TargetSpacing)
	}
	want := cfg.TargetUnit()
	f, err := volume.UnitScale(u, want)
	if err != nil {
		c := ds.Cases[first]
		return fmt.Errorf("data: case %s (%s) against data.spacing_unit %s: %w", c.ID, c.Images[0], want, err)
	}
	if f != 1 {
		c := ds.Cases[first]
		return fmt.Errorf("data: data.spacing_unit is %s and case %s (%s) is in %s: data.target_spacing %v is in the spacing unit, so the cases must be too; write them in %s, or give target_spacing in %s with spacing_unit: %s",
			want, c.ID, c.Images[0], u, cfg.TargetSpacing, want, u, u)
	}
	return nil
}
