package infer

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/internal/atomicfile"
	"github.com/voxtrain/voxtrain/metrics"
	"github.com/voxtrain/voxtrain/runlog"
)

// CaseScores are one case's results per foreground class.
type CaseScores struct {
	ID   string
	Dice []float64
	HD95 []float64
}

// Scores summarise the cases of a sliding-window validation: per-case
// scores and, per class, the mean over cases (NaN cases left out, as
// nnU-Net).
type Scores struct {
	Cases    []CaseScores
	MeanDice []float64
	MeanHD95 []float64
}

// Mean returns the mean over classes of the per-class mean Dice.
func (s Scores) Mean() float64 { return metrics.NanMean(s.MeanDice) }

// ScoreCase compares a prediction with the label of v (on v's grid, with
// v's voxel size for HD95): Dice per foreground class, and HD95 when asked.
func ScoreCase(id string, pred []uint8, v *data.Volume, classes int, hd95 bool) (CaseScores, error) {
	k := max(classes, 2)
	conf, err := metrics.Confusions(pred, v.Label, k)
	if err != nil {
		return CaseScores{}, fmt.Errorf("case %s: %w", id, err)
	}
	cs := CaseScores{ID: id}
	for c := 1; c < k; c++ {
		cs.Dice = append(cs.Dice, conf[c].Dice())
		if hd95 {
			a := make([]bool, len(pred))
			b := make([]bool, len(pred))
			for i := range pred {
				a[i] = pred[i] == uint8(c)
				b[i] = v.Label[i] == uint8(c)
			}
			h, err := metrics.HD95(a, b, metrics.Shape(v.Shape), v.Spacing)
			if err != nil {
				return CaseScores{}, fmt.Errorf("case %s: %w", id, err)
			}
			cs.HD95 = append(cs.HD95, h)
		}
	}
	return cs, nil
}

// Summarise averages case scores per class.
func Summarise(cases []CaseScores) Scores {
	s := Scores{Cases: cases}
	if len(cases) == 0 {
		return s
	}
	k := len(cases[0].Dice)
	for c := 0; c < k; c++ {
		var d, h []float64
		for _, cs := range cases {
			d = append(d, cs.Dice[c])
			if len(cs.HD95) > c && !math.IsInf(cs.HD95[c], 0) {
				h = append(h, cs.HD95[c])
			}
		}
		s.MeanDice = append(s.MeanDice, metrics.NanMean(d))
		if len(cases[0].HD95) > 0 {
			s.MeanHD95 = append(s.MeanHD95, metrics.NanMean(h))
		}
	}
	return s
}

// summaryJSON is summary.json: NaN Dice (a class absent from prediction and
// reference) and infinite HD95 (absent from one of them) are written as null.
type summaryJSON struct {
	Cases              []caseJSON     `json:"cases"`
	MeanDice           []runlog.Float `json:"mean_dice"`
	MeanDiceAllClasses runlog.Float   `json:"mean_dice_all_classes"`
	MeanHD95           []runlog.Float `json:"mean_hd95,omitempty"`
}

type caseJSON struct {
	ID   string         `json:"id"`
	Dice []runlog.Float `json:"dice"`
	HD95 []runlog.Float `json:"hd95,omitempty"`
}

func jsonFloats(v []float64) []runlog.Float {
	out := make([]runlog.Float, len(v))
	for i, x := range v {
		out[i] = runlog.Float(x)
	}
	return out
}

// WriteSummary writes s as dir/summary.json (atomically).
func (s Scores) WriteSummary(dir string) error {
	out := summaryJSON{MeanDice: jsonFloats(s.MeanDice), MeanDiceAllClasses: runlog.Float(s.Mean()), MeanHD95: jsonFloats(s.MeanHD95)}
	for _, c := range s.Cases {
		out.Cases = append(out.Cases, caseJSON{ID: c.ID, Dice: jsonFloats(c.Dice), HD95: jsonFloats(c.HD95)})
	}
	b, err := json.MarshalIndent(out, "", " ")
	if err != nil {
		return err
	}
	// Beside the predictions, and like them made with the umask's
	// permissions.
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	return atomicfile.WriteFileUmask(filepath.Join(dir, "summary.json"), append(b, '\n'), 0o666)
}
