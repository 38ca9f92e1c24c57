package evaluation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
)

// Read reads a summary.json written by Write or by nnU-Net (whose NaN,
// Infinity and -Infinity tokens Go's encoding/json refuses; see Write).
// Keys it does not know are ignored; a case missing a label of the mean
// is an error naming the file. Region keys ("(1, 2, 3)") are read into
// Regions (see ParseRegionKey), named by label_names.
func Read(path string) (*Summary, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var raw struct {
		ForegroundMean map[string]pyFloat            `json:"foreground_mean"`
		Mean           map[string]map[string]pyFloat `json:"mean"`
		LabelNames     map[string]string             `json:"label_names"`
		Cases          []struct {
			Metrics        map[string]map[string]pyFloat `json:"metrics"`
			PredictionFile string                        `json:"prediction_file"`
			ReferenceFile  string                        `json:"reference_file"`
		} `json:"metric_per_case"`
	}
	if err := json.Unmarshal(quoteConstants(b), &raw); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	s := &Summary{}
	// Integer keys are labels; one region key ("(1, 2)") makes every key
	// a region, an integer one a scalar region (nnU-Net's
	// key_to_label_or_region).
	var keys []string
	regions := false
	for k := range raw.Mean {
		keys = append(keys, k)
		if _, err := strconv.Atoi(k); err != nil {
			regions = true
		}
	}
	if regions {
		sort.Strings(keys)
		for _, k := range keys {
			r, err := ParseRegionKey(k)
			if err != nil {
				return nil, fmt.Errorf("%s: mean: %w", path, err)
			}
			r.Name = raw.LabelNames[k]
			s.Regions = append(s.Regions, r)
		}
	} else {
		for _, k := range keys {
			l, _ := strconv.Atoi(k)
			s.Labels = append(s.Labels, l)
		}
		sort.Ints(s.Labels)
		for i, l := range s.Labels {
			keys[i] = strconv.Itoa(l)
		}
	}
	metricsOf := func(m map[string]pyFloat) Metrics {
		var out Metrics
		for f, name := range fieldNames {
			v, ok := m[name]
			if !ok {
				v = pyFloat(math.NaN())
			}
			*out.field(f) = float64(v)
		}
		if _, ok := m["HD95"]; ok {
			s.HD95 = true
		}
		return out
	}
	for _, k := range keys {
		s.Mean = append(s.Mean, metricsOf(raw.Mean[k]))
	}
	s.ForegroundMean = metricsOf(raw.ForegroundMean)
	for i, c := range raw.Cases {
		cs := Case{PredictionFile: c.PredictionFile, ReferenceFile: c.ReferenceFile}
		for j, k := range keys {
			m, ok := c.Metrics[k]
			if !ok {
				what := fmt.Sprintf("label %s", k)
				if regions {
					what = "region " + s.Regions[j].Key()
				}
				return nil, fmt.Errorf("%s: metric_per_case[%d] (%s) has no %s", path, i, c.PredictionFile, what)
			}
			cs.Metrics = append(cs.Metrics, metricsOf(m))
		}
		s.Cases = append(s.Cases, cs)
	}
	if !regions {
		for k, n := range raw.LabelNames {
			if l, err := strconv.Atoi(k); err == nil {
				if s.Names == nil {
					s.Names = map[int]string{}
				}
				s.Names[l] = n
			}
		}
	}
	return s, nil
}

// pyFloat is a JSON number, or one of Python's constants quoted by
// quoteConstants.
type pyFloat float64

func (f *pyFloat) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case `"NaN"`, "null":
		*f = pyFloat(math.NaN())
	case `"Infinity"`:
		*f = pyFloat(math.Inf(1))
	case `"-Infinity"`:
		*f = pyFloat(math.Inf(-1))
	default:
		var v float64
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*f = pyFloat(v)
	}
	return nil
}

// quoteConstants turns Python's bare NaN, Infinity and -Infinity tokens
// (outside strings) into the strings "NaN", "Infinity", "-Infinity".
func quoteConstants(b []byte) []byte {
	var out bytes.Buffer
	out.Grow(len(b))
	inStr := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inStr {
			out.WriteByte(c)
			if c == '\\' && i+1 < len(b) {
				i++
				out.WriteByte(b[i])
			} else if c == '"' {
				inStr = false
			}
			continue
		}
		if c == '"' {
			inStr = true
			out.WriteByte(c)
			continue
		}
		matched := false
		for _, tok := range []string{"-Infinity", "Infinity", "NaN"} {
			if bytes.HasPrefix(b[i:], []byte(tok)) {
				out.WriteString(`"` + tok + `"`)
				i += len(tok) - 1
				matched = true
				break
			}
		}
		if !matched {
			out.WriteByte(c)
		}
	}
	return out.Bytes()
}
