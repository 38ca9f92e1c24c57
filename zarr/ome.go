package zarr

import (
	"encoding/json"
	"fmt"
)

// multiscale is one OME-NGFF "multiscales" entry (0.4 in .zattrs, 0.5
// under zarr.json's attributes.ome), or a COSEM one (cosem.go): datasets
// with a "transform" each and no axes.
type multiscale struct {
	Axes       []omeAxis      `json:"axes"`
	Datasets   []omeDataset   `json:"datasets"`
	Transforms []omeTransform `json:"coordinateTransformations"`
	// cosem: the datasets' transforms, not axes and
	// coordinateTransformations, say where the levels are.
	cosem bool
}

// omeDataset is one level of a multiscale: its array's path and its
// OME-NGFF transformations, or its COSEM transform.
type omeDataset struct {
	Path       string          `json:"path"`
	Transforms []omeTransform  `json:"coordinateTransformations"`
	Transform  json.RawMessage `json:"transform"`
}

type omeAxis struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Unit string `json:"unit"`
}

type omeTransform struct {
	Type        string    `json:"type"`
	Scale       []float64 `json:"scale"`
	Translation []float64 `json:"translation"`
	Path        string    `json:"path"`
}

// findMultiscales returns a group's first multiscale image, or nil when
// its attributes have none.
func findMultiscales(attrs map[string]json.RawMessage, file string) (*multiscale, error) {
	raw := attrs["multiscales"]
	if ome, ok := attrs["ome"]; ok { // 0.5
		var o struct {
			Multiscales json.RawMessage `json:"multiscales"`
		}
		if err := json.Unmarshal(ome, &o); err != nil {
			return nil, fmt.Errorf("%s: ome: %w", file, err)
		}
		raw = o.Multiscales
	}
	if len(raw) == 0 {
		return nil, nil
	}
	var ms []multiscale
	if err := json.Unmarshal(raw, &ms); err != nil {
		return nil, fmt.Errorf("%s: multiscales: %w", file, err)
	}
	if len(ms) == 0 || len(ms[0].Datasets) == 0 {
		return nil, fmt.Errorf("%s: multiscales lists no dataset", file)
	}
	m := &ms[0]
	// COSEM's multiscales (OpenOrganelle's N5 groups) have no axes: each
	// dataset's transform names its axes. One with axes is OME-NGFF's,
	// whatever else its datasets carry.
	if len(m.Axes) == 0 && len(m.Datasets[0].Transform) > 0 {
		for i, d := range m.Datasets {
			if len(d.Transform) == 0 {
				return nil, fmt.Errorf("%s: multiscales[0].datasets[%d] (%s) has no transform, datasets[0] has one (COSEM lists a transform for every level)", file, i, d.Path)
			}
		}
		m.cosem = true
	}
	return m, nil
}

// scaleTranslation composes a dataset's transformations and then the
// multiscale's: per axis, world = scale·index + translation.
func (m *multiscale) scaleTranslation(level, ndim int, file string) (scale, trans []float64, err error) {
	scale, trans = make([]float64, ndim), make([]float64, ndim)
	for i := range scale {
		scale[i] = 1
	}
	apply := func(ts []omeTransform, where string) error {
		for _, t := range ts {
			switch t.Type {
			case "scale":
				if len(t.Scale) != ndim {
					return fmt.Errorf("%s: %s scale %v for %d axes", file, where, t.Scale, ndim)
				}
				for i := range scale {
					scale[i] *= t.Scale[i]
					trans[i] *= t.Scale[i]
				}
			case "translation":
				if len(t.Translation) != ndim {
					return fmt.Errorf("%s: %s translation %v for %d axes", file, where, t.Translation, ndim)
				}
				for i := range trans {
					trans[i] += t.Translation[i]
				}
			case "identity":
			default:
				return fmt.Errorf("%s: %s transformation %q is not read (scale, translation are; a path is not)", file, where, t.Type)
			}
			if t.Path != "" {
				return fmt.Errorf("%s: %s: transformations stored in a path are not read", file, where)
			}
		}
		return nil
	}
	if err := apply(m.Datasets[level].Transforms, fmt.Sprintf("datasets[%d]", level)); err != nil {
		return nil, nil, err
	}
	if err := apply(m.Transforms, "multiscale"); err != nil {
		return nil, nil, err
	}
	return scale, trans, nil
}

// axisRoles maps an array's axes to the volume's: for (D, H, W) the array
// axis of each, the channel axis (−1 for none), and the others (all of
// length 1). names are OME axes names or v3 dimension_names; types the
// OME axis types (may be empty).
type axisRoles struct {
	spatial [3]int // array axis of D, H, W; −1 when absent (a 2D image)
	channel int
	other   []int
}

func rolesFromNames(names, types []string, shape []int, file string) (axisRoles, error) {
	r := axisRoles{spatial: [3]int{-1, -1, -1}, channel: -1}
	for i, nm := range names {
		typ := ""
		if i < len(types) {
			typ = types[i]
		}
		switch {
		case nm == "z" || nm == "y" || nm == "x":
			k := map[string]int{"z": 0, "y": 1, "x": 2}[nm]
			if r.spatial[k] >= 0 {
				return r, fmt.Errorf("%s: axis %q twice", file, nm)
			}
			r.spatial[k] = i
		case typ == "channel" || nm == "c" || nm == "channel":
			if r.channel >= 0 {
				return r, fmt.Errorf("%s: two channel axes", file)
			}
			r.channel = i
		case typ == "time" || nm == "t" || nm == "time":
			if shape[i] != 1 {
				return r, fmt.Errorf("%s: time axis %q has %d points; a volume reads one (open one time point as its own array)", file, nm, shape[i])
			}
			r.other = append(r.other, i)
		case typ == "space":
			return r, fmt.Errorf("%s: spatial axis %q: want the names z, y, x", file, nm)
		default:
			if shape[i] != 1 {
				return r, fmt.Errorf("%s: axis %q (type %q) has length %d; only z, y, x, a channel axis and length-1 axes are read", file, nm, typ, shape[i])
			}
			r.other = append(r.other, i)
		}
	}
	if r.spatial[1] < 0 || r.spatial[2] < 0 {
		return r, fmt.Errorf("%s: axes %v lack y and x", file, names)
	}
	return r, nil
}

// rolesByRank is the layout of an array without axis names: (H, W),
// (D, H, W), (C, D, H, W), (T=1, C, D, H, W).
func rolesByRank(shape []int, file string) (axisRoles, error) {
	switch len(shape) {
	case 2:
		return axisRoles{spatial: [3]int{-1, 0, 1}, channel: -1}, nil
	case 3:
		return axisRoles{spatial: [3]int{0, 1, 2}, channel: -1}, nil
	case 4:
		return axisRoles{spatial: [3]int{1, 2, 3}, channel: 0}, nil
	case 5:
		if shape[0] != 1 {
			return axisRoles{}, fmt.Errorf("%s: 5D shape %v without axis names: the first (time) axis must be 1", file, shape)
		}
		return axisRoles{spatial: [3]int{2, 3, 4}, channel: 1, other: []int{0}}, nil
	}
	return axisRoles{}, fmt.Errorf("%s: shape %v: want 2 to 5 dimensions", file, shape)
}
