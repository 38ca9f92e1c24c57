package postprocess

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/voxtrain/voxtrain/evaluation"
)

// TestDetermineMatchesNNUNet runs Determine on the folders of
// testdata/nnunet (see make_fixture.py) and holds its steps and scores to
// what nnU-Net's determine_postprocessing chose and measured there.
func TestDetermineMatchesNNUNet(t *testing.T) {
	for _, name := range []string{"fg_kept", "class_kept", "rejected"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("testdata", "nnunet", name)
			var nn struct {
				Kwargs []struct {
					Labels json.RawMessage `json:"labels_or_regions"`
				} `json:"postprocessing_kwargs"`
				Before, After struct {
					FG   map[string]float64            `json:"foreground_mean"`
					Mean map[string]map[string]float64 `json:"mean"`
				}
			}
			b, err := os.ReadFile(filepath.Join(dir, "nnunet_postprocessing.json"))
			if err != nil {
				t.Fatal(err)
			}
			// nnU-Net's keys are "input_folder" and "postprocessed".
			var raw map[string]json.RawMessage
			if err := json.Unmarshal(b, &raw); err != nil {
				t.Fatal(err)
			}
			json.Unmarshal(b, &nn)
			json.Unmarshal(raw["input_folder"], &nn.Before)
			json.Unmarshal(raw["postprocessed"], &nn.After)
			var want [][]int
			for _, k := range nn.Kwargs {
				var one int
				var many []int
				if json.Unmarshal(k.Labels, &many) == nil {
					want = append(want, many)
				} else if json.Unmarshal(k.Labels, &one) == nil {
					want = append(want, []int{one})
				} else {
					t.Fatalf("kwargs %s", k.Labels)
				}
			}
			labels, names, ending, err := evaluation.DatasetLabels(filepath.Join(dir, "dataset.json"))
			if err != nil {
				t.Fatal(err)
			}
			pairs, err := evaluation.MatchFiles(filepath.Join(dir, "pred"), filepath.Join(dir, "ref"), ending)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Determine(pairs, Options{Labels: labels, Names: names})
			if err != nil {
				t.Fatal(err)
			}
			var got [][]int
			for _, s := range res.Plan.Steps {
				got = append(got, s.Labels)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("steps %v, nnU-Net's %v (decisions %+v)", got, want, res.Plan.Decisions)
			}
			close := func(what string, g float64, w float64) {
				if math.Abs(g-w) > 1e-12 {
					t.Errorf("%s: %v, nnU-Net %v", what, g, w)
				}
			}
			close("Dice before", res.Baseline.ForegroundMean.Dice, nn.Before.FG["Dice"])
			close("Dice after", res.Postprocess.ForegroundMean.Dice, nn.After.FG["Dice"])
			for j, l := range res.Postprocess.Labels {
				k := res.Postprocess.LabelName(l)
				close(k+" Dice before", res.Baseline.Mean[j].Dice, nn.Before.Mean[itoa(l)]["Dice"])
				close(k+" Dice after", res.Postprocess.Mean[j].Dice, nn.After.Mean[itoa(l)]["Dice"])
			}
			if float64(res.Plan.After.ForegroundMeanDice) != res.Postprocess.ForegroundMean.Dice {
				t.Errorf("plan's after %v, summary's %v", res.Plan.After.ForegroundMeanDice, res.Postprocess.ForegroundMean.Dice)
			}
		})
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }
