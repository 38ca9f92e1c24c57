package evaluation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/voxtrain/voxtrain/internal/atomicfile"
	"github.com/voxtrain/voxtrain/internal/npsum"
)

// Case is one prediction's scores against its reference.
type Case struct {
	// PredictionFile and ReferenceFile are the files compared, as nnU-Net
	// writes them ("" where none was written, e.g. a prediction scored in
	// memory).
	PredictionFile, ReferenceFile string
	// Metrics holds one entry per Summary.Labels (or Summary.Regions), in
	// that order.
	Metrics []Metrics
}

// Summary is nnU-Net's summary.json: per-case scores, the per-label mean
// over cases, and the mean of those over the foreground labels.
type Summary struct {
	// Labels are the scored foreground labels, increasing (nil when
	// Regions were scored).
	Labels []int
	// Names names labels as dataset.json does (label → name; may be nil).
	Names map[int]string
	// Regions, set instead of Labels, are the scored regions of a
	// region-based dataset (nnU-Net v2's foreground_regions), each naming
	// itself: in dataset.json's order from Folder, in the file's (sorted)
	// key order from Read, as nnU-Net's load_summary_json.
	Regions []Region
	// HD95 says the cases carry HD95 (written as an extra "HD95" key).
	HD95  bool
	Cases []Case
	// Mean holds per label (Labels' order; Regions' when scored) each
	// metric's mean over the cases in their order, NaN cases left out
	// (np.nanmean, NumPy's pairwise sums and all); NaN when every case is
	// NaN. HD95's mean also leaves out infinite cases (a label in only one
	// of prediction and reference), as voxtrain always has.
	Mean []Metrics
	// ForegroundMean is each metric's plain mean over Mean (np.mean, as
	// nnU-Net: NaN when one label's mean is NaN).
	ForegroundMean Metrics
}

// SortCases orders cases as nnU-Net's compute_metrics_on_folder lists
// them — its predictions folder's files sorted by name — so that means
// over eight or more cases, whose pairwise sums depend on the order, are
// its bits: by the prediction file's name, the reference's where no
// prediction file was written (both are the case id and the file ending).
func SortCases(cases []Case) {
	name := func(c Case) string {
		if c.PredictionFile != "" {
			return filepath.Base(c.PredictionFile)
		}
		return filepath.Base(c.ReferenceFile)
	}
	sort.SliceStable(cases, func(i, j int) bool { return name(cases[i]) < name(cases[j]) })
}

// Summarise computes the means of cases scored on labels.
func Summarise(labels []int, names map[int]string, hd95 bool, cases []Case) *Summary {
	s := &Summary{Labels: labels, Names: names, HD95: hd95, Cases: cases}
	s.means(len(labels))
	return s
}

// SummariseRegions computes the means of cases scored on regions. The
// foreground mean is over every region, in the given order (nnU-Net's
// sums follow its region list; no region is background).
func SummariseRegions(regions []Region, hd95 bool, cases []Case) *Summary {
	s := &Summary{Regions: regions, HD95: hd95, Cases: cases}
	s.means(len(regions))
	return s
}

// means fills Mean and ForegroundMean from the cases' n entries.
func (s *Summary) means(n int) {
	s.Mean = make([]Metrics, n)
	for j := range n {
		s.Mean[j] = meanOf(len(s.Cases), func(i int) Metrics { return s.Cases[i].Metrics[j] }, true)
	}
	s.ForegroundMean = meanOf(n, func(j int) Metrics { return s.Mean[j] }, false)
}

// Key is entry j's summary.json key (Mean[j], a case's Metrics[j]): the
// label, or the region's key (Region.Key).
func (s *Summary) Key(j int) string {
	if s.Regions != nil {
		return s.Regions[j].Key()
	}
	return strconv.Itoa(s.Labels[j])
}

// EntryName is entry j's name for messages: LabelName's "label 2
// (Posterior)", or "region (1, 2, 3) (whole tumor)".
func (s *Summary) EntryName(j int) string {
	if s.Regions != nil {
		r := s.Regions[j]
		if r.Name != "" {
			return fmt.Sprintf("region %s (%s)", r.Key(), r.Name)
		}
		return "region " + r.Key()
	}
	return s.LabelName(s.Labels[j])
}

// entryLabel is entry j's name as dataset.json gives it ("" when none).
func (s *Summary) entryLabel(j int) string {
	if s.Regions != nil {
		return s.Regions[j].Name
	}
	return s.Names[s.Labels[j]]
}

// entries is the number of scored labels or regions.
func (s *Summary) entries() int {
	if s.Regions != nil {
		return len(s.Regions)
	}
	return len(s.Labels)
}

// meanOf averages each field of n Metrics as nnU-Net's
// compute_metrics_on_folder does, bit for bit: with nan, np.nanmean over
// the values in order (the per-label mean over cases), else np.mean (the
// foreground mean over labels). NumPy sums pairwise (package npsum), so
// from 8 values on a running sum would differ in the last bits. The
// counts are numpy integers there, averaged in float64: their sums are
// exact either way. HD95 (voxtrain's) leaves out infinite cases too.
func meanOf(n int, at func(int) Metrics, nan bool) Metrics {
	var out Metrics
	vals := make([]float64, n)
	for f := range fieldNames {
		for i := range n {
			m := at(i)
			vals[i] = *m.field(f)
		}
		switch {
		case !nan:
			*out.field(f) = npsum.Mean(vals)
		case f == hd95Field:
			*out.field(f) = npsum.NanMeanFunc(vals, notFinite)
		default:
			*out.field(f) = npsum.NanMean(vals)
		}
	}
	return out
}

func notFinite(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }

// fieldNames are summary.json's metric keys, in Metrics' field order.
var fieldNames = [...]string{"Dice", "IoU", "FP", "TP", "FN", "TN", "n_pred", "n_ref", "HD95"}

const hd95Field = 8

// countField reports whether field f is a voxel count (an integer in a
// case's metrics, which Python writes without a fraction).
func countField(f int) bool { return f >= 2 && f <= 7 }

func (m *Metrics) field(f int) *float64 {
	switch f {
	case 0:
		return &m.Dice
	case 1:
		return &m.IoU
	case 2:
		return &m.FP
	case 3:
		return &m.TP
	case 4:
		return &m.FN
	case 5:
		return &m.TN
	case 6:
		return &m.NPred
	case 7:
		return &m.NRef
	default:
		return &m.HD95
	}
}

// MeanDice returns each label's mean Dice, in Labels' order (Regions').
func (s *Summary) MeanDice() []float64 {
	out := make([]float64, len(s.Mean))
	for i, m := range s.Mean {
		out[i] = m.Dice
	}
	return out
}

// MeanHD95 returns each label's mean HD95, in Labels' order (Regions');
// nil when HD95 was not computed.
func (s *Summary) MeanHD95() []float64 {
	if !s.HD95 {
		return nil
	}
	out := make([]float64, len(s.Mean))
	for i, m := range s.Mean {
		out[i] = m.HD95
	}
	return out
}

// LabelName is "label 2 (Posterior)", or "label 2" where no name is known.
func (s *Summary) LabelName(label int) string {
	if n := s.Names[label]; n != "" {
		return fmt.Sprintf("label %d (%s)", label, n)
	}
	return fmt.Sprintf("label %d", label)
}

// Write writes s as nnU-Net's summary.json at path (atomically, with the
// umask's permissions, its folder made when missing). The layout is what
// nnU-Net's save_summary_json writes (json.dump, indent 4, sorted keys):
//
//	{"foreground_mean": {metric: value},
//	 "label_names": {"1": name},            (voxtrain's; only when known)
//	 "mean": {"1": {metric: value}, …},
//	 "metric_per_case": [{"metrics": {"1": {metric: value}}, "prediction_file": …, "reference_file": …}]}
//
// with the metrics Dice, IoU, FP, TP, FN, TN, n_pred, n_ref (and HD95 when
// s.HD95). Regions are keyed as nnU-Net keys them (Region.Key: "(1, 2,
// 3)", "(3,)", "3"), label_names keyed alike. NaN is written as the bare token NaN and ±∞ as Infinity and
// -Infinity: Python's json.dump does so (allow_nan=True is its default),
// so nnU-Net's own files hold them, and Python's json.load (hence nnU-Net's
// load_summary_json) reads them back as float('nan') and float('inf').
// Writing null instead would load as None and break nnU-Net's comparisons
// (determine_postprocessing's Dice >). The price: strict JSON parsers, Go's
// encoding/json among them, refuse the file; Read accepts it.
func (s *Summary) Write(path string) error {
	var b bytes.Buffer
	b.WriteString("{\n")
	b.WriteString(`    "foreground_mean": `)
	s.writeMetrics(&b, s.ForegroundMean, 1, false)
	b.WriteString(",\n")
	order := make([]int, s.entries())
	for i := range order {
		order[i] = i
	}
	// Python sorts the keys as strings: "10" before "2", "(1, 2)" before
	// "1".
	sort.Slice(order, func(a, c int) bool { return s.Key(order[a]) < s.Key(order[c]) })
	var named []int
	for _, j := range order {
		if s.entryLabel(j) != "" {
			named = append(named, j)
		}
	}
	if len(named) > 0 {
		b.WriteString(`    "label_names": {` + "\n")
		for i, j := range named {
			name, _ := json.Marshal(s.entryLabel(j))
			fmt.Fprintf(&b, "        %q: %s%s\n", s.Key(j), name, comma(i, len(named)))
		}
		b.WriteString("    },\n")
	}
	b.WriteString(`    "mean": {` + "\n")
	for i, j := range order {
		fmt.Fprintf(&b, "        %q: ", s.Key(j))
		s.writeMetrics(&b, s.Mean[j], 2, false)
		b.WriteString(comma(i, len(order)) + "\n")
	}
	b.WriteString("    },\n")
	b.WriteString(`    "metric_per_case": [`)
	if len(s.Cases) == 0 {
		b.WriteString("],\n")
	} else {
		b.WriteString("\n")
		for ci, c := range s.Cases {
			b.WriteString("        {\n            \"metrics\": {\n")
			for i, j := range order {
				fmt.Fprintf(&b, "                %q: ", s.Key(j))
				s.writeMetrics(&b, c.Metrics[j], 4, true)
				b.WriteString(comma(i, len(order)) + "\n")
			}
			pf, _ := json.Marshal(c.PredictionFile)
			rf, _ := json.Marshal(c.ReferenceFile)
			fmt.Fprintf(&b, "            },\n            \"prediction_file\": %s,\n            \"reference_file\": %s\n        }%s\n", pf, rf, comma(ci, len(s.Cases)))
		}
		b.WriteString("    ]\n")
	}
	b.WriteString("}")
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	if err := atomicfile.WriteFileUmask(path, b.Bytes(), 0o666); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func comma(i, n int) string {
	if i < n-1 {
		return ","
	}
	return ""
}

// writeMetrics writes one {metric: value} object at the given indent level
// (4 spaces each), keys sorted as Python sorts them (capitals first).
func (s *Summary) writeMetrics(b *bytes.Buffer, m Metrics, level int, counts bool) {
	keys := []int{0, 4, 2, 1, 5, 3, 6, 7} // Dice FN FP IoU TN TP n_pred n_ref
	if s.HD95 {
		keys = []int{0, 4, 2, hd95Field, 1, 5, 3, 6, 7}
	}
	in := strings.Repeat("    ", level+1)
	b.WriteString("{\n")
	for i, f := range keys {
		v := *m.field(f)
		fmt.Fprintf(b, "%s%q: %s%s\n", in, fieldNames[f], pyNumber(v, counts && countField(f)), comma(i, len(keys)))
	}
	b.WriteString(strings.Repeat("    ", level) + "}")
}

// pyNumber formats v as Python's json.dump does: an int as digits, a float
// as repr (shortest round-trip digits, always with a fraction or an
// exponent, the exponent from 1e16 up and below 1e-4), NaN and ±∞ as the
// tokens NaN, Infinity and -Infinity.
func pyNumber(v float64, integer bool) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "Infinity"
	case math.IsInf(v, -1):
		return "-Infinity"
	case integer && v == math.Trunc(v) && math.Abs(v) < 1<<53:
		return strconv.FormatInt(int64(v), 10)
	}
	e := strconv.FormatFloat(v, 'e', -1, 64)
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	if exp < -4 || exp >= 16 {
		return e
	}
	f := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.ContainsAny(f, ".") {
		f += ".0"
	}
	return f
}
