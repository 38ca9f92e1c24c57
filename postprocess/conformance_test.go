package postprocess

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
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

// nnDecision is one line nnU-Net's determine_postprocessing printed
// (testdata/nnunet_regions/*/nnunet_log.txt): the candidate ("" for the
// all-foreground step, else the region's key), whether it was kept and
// the Dice it printed, rounded to 5 digits (NaN where it printed none).
type nnDecision struct {
	entry         string
	kept          bool
	before, after float64
}

var (
	nnFgKept    = regexp.MustCompile(`^Results were improved by removing all but the largest foreground region\. Mean dice before: (\S+) after: (\S+)$`)
	nnFgNot     = regexp.MustCompile(`^Removing all but the largest foreground region did not improve results!$`)
	nnEntryKept = regexp.MustCompile(`^Results were improved by removing all but the largest component for (.+)\. Dice before: (\S+) after: (\S+)$`)
	nnEntryNot  = regexp.MustCompile(`^Removing all but the largest component for (.+) did not improve results! Dice before: (\S+) after: (\S+)$`)
)

func readNNLog(t *testing.T, path string) []nnDecision {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	num := func(s string) float64 {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("%s: %q: %v", path, s, err)
		}
		return v
	}
	var out []nnDecision
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		switch m := (struct{ a, b, c, d []string }{nnFgKept.FindStringSubmatch(line), nnFgNot.FindStringSubmatch(line), nnEntryKept.FindStringSubmatch(line), nnEntryNot.FindStringSubmatch(line)}); {
		case m.a != nil:
			out = append(out, nnDecision{"", true, num(m.a[1]), num(m.a[2])})
		case m.b != nil:
			out = append(out, nnDecision{"", false, math.NaN(), math.NaN()})
		case m.c != nil:
			out = append(out, nnDecision{m.c[1], true, num(m.c[2]), num(m.c[3])})
		case m.d != nil:
			out = append(out, nnDecision{m.d[1], false, num(m.d[2]), num(m.d[3])})
		default:
			t.Fatalf("%s: line %q", path, line)
		}
	}
	return out
}

func readLabels(t *testing.T, path string) []uint8 {
	t.Helper()
	lf, err := evaluation.ReadLabelFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return lf.Labels
}

// TestDetermineMatchesNNUNetRegions runs Determine on the region-based
// folders of testdata/nnunet_regions (see make_fixture.py) and holds it to
// what nnU-Net's determine_postprocessing did there: every decision in
// order (candidate, kept, the Dice it printed), the steps kept, the
// scores before and after by region, and the post-processed label maps,
// both determine's own and apply_postprocessing's with the steps it
// returned; and each candidate step alone, kept or not, to
// remove_all_but_largest_component_from_segmentation's output.
func TestDetermineMatchesNNUNetRegions(t *testing.T) {
	for _, name := range []string{"regions", "one_region"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("testdata", "nnunet_regions", name)
			d, err := evaluation.ReadDataset(filepath.Join(dir, "dataset.json"))
			if err != nil {
				t.Fatal(err)
			}
			if d.Regions == nil {
				t.Fatal("the fixture's dataset.json has no regions")
			}
			pairs, err := evaluation.MatchFiles(filepath.Join(dir, "pred"), filepath.Join(dir, "ref"), d.Ending)
			if err != nil {
				t.Fatal(err)
			}
			var logb strings.Builder
			res, err := Determine(pairs, Options{Labels: d.Labels, Regions: d.Regions, Log: &logb})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(res.Plan.Labels, d.Labels) || len(res.Plan.Regions) != len(d.Regions) {
				t.Errorf("plan labels %v regions %v", res.Plan.Labels, res.Plan.Regions)
			}

			// Decisions, in order.
			want := readNNLog(t, filepath.Join(dir, "nnunet_log.txt"))
			if len(res.Plan.Decisions) != len(want) {
				t.Fatalf("%d decisions, nnU-Net made %d:\n%s", len(res.Plan.Decisions), len(want), logb.String())
			}
			for i, w := range want {
				g := res.Plan.Decisions[i]
				if g.Region != w.entry || g.Kept != w.kept {
					t.Errorf("decision %d: region %q kept %v, nnU-Net's %q kept %v", i, g.Region, g.Kept, w.entry, w.kept)
				}
				for _, c := range []struct {
					what string
					g, w float64
				}{{"before", float64(g.DiceBefore), w.before}, {"after", float64(g.DiceAfter), w.after}} {
					if !math.IsNaN(c.w) && !(math.Abs(c.g-c.w) <= 5e-6+1e-12) {
						t.Errorf("decision %d (%q): Dice %s %v, nnU-Net printed %v", i, w.entry, c.what, c.g, c.w)
					}
				}
			}
			if name == "regions" {
				// The fixture's point: the first step raised the mean but
				// lowered two regions (vetoed).
				d0 := res.Plan.Decisions[0]
				if !(d0.DiceAfter > d0.DiceBefore) || !reflect.DeepEqual(d0.WorseRegions, []string{"(2, 3)", "3"}) {
					t.Errorf("first decision %+v: want a rise vetoed by (2, 3) and 3", d0)
				}
			}

			// Steps kept: nnU-Net's kwargs, in order.
			var nn struct {
				Kwargs []struct {
					LR json.RawMessage `json:"labels_or_regions"`
				} `json:"postprocessing_kwargs"`
			}
			b, err := os.ReadFile(filepath.Join(dir, "nnunet_postprocessing.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &nn); err != nil {
				t.Fatal(err)
			}
			var kept []nnDecision
			for _, w := range want {
				if w.kept {
					kept = append(kept, w)
				}
			}
			if len(res.Plan.Steps) != len(nn.Kwargs) || len(kept) != len(nn.Kwargs) {
				t.Fatalf("%d steps, nnU-Net kept %d (log %d): %+v", len(res.Plan.Steps), len(nn.Kwargs), len(kept), res.Plan.Steps)
			}
			for i, k := range nn.Kwargs {
				var one int
				var many []int
				if json.Unmarshal(k.LR, &many) != nil {
					if err := json.Unmarshal(k.LR, &one); err != nil {
						t.Fatalf("kwargs %s", k.LR)
					}
					many = []int{one}
				}
				s := res.Plan.Steps[i]
				if !reflect.DeepEqual(s.Labels, regionLabels(many)) || s.Region != kept[i].entry {
					t.Errorf("step %d: labels %v region %q, nnU-Net's %s (%q)", i, s.Labels, s.Region, k.LR, kept[i].entry)
				}
			}

			// Scores by region.
			var raw map[string]json.RawMessage
			json.Unmarshal(b, &raw)
			for _, c := range []struct {
				key string
				s   *evaluation.Summary
			}{{"input_folder", res.Baseline}, {"postprocessed", res.Postprocess}} {
				var sc struct {
					FG   map[string]float64            `json:"foreground_mean"`
					Mean map[string]map[string]float64 `json:"mean"`
				}
				if err := json.Unmarshal(raw[c.key], &sc); err != nil {
					t.Fatal(err)
				}
				if len(sc.Mean) != len(c.s.Mean) {
					t.Errorf("%s: %d entries, nnU-Net %d", c.key, len(c.s.Mean), len(sc.Mean))
				}
				if g, w := c.s.ForegroundMean.Dice, sc.FG["Dice"]; math.Abs(g-w) > 1e-12 {
					t.Errorf("%s: foreground mean Dice %v, nnU-Net %v", c.key, g, w)
				}
				for j := range c.s.Mean {
					w, ok := sc.Mean[c.s.Key(j)]
					if !ok || math.Abs(c.s.Mean[j].Dice-w["Dice"]) > 1e-12 {
						t.Errorf("%s: %s mean Dice %v, nnU-Net %v", c.key, c.s.Key(j), c.s.Mean[j].Dice, w)
					}
				}
			}

			// Label maps: the plan, written and read back, applied to the
			// predictions; and each candidate alone.
			path := filepath.Join(t.TempDir(), "postprocessing.json")
			if err := res.Plan.Write(path); err != nil {
				t.Fatal(err)
			}
			plan, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			candidates := []Step{{Op: KeepLargestOp, Labels: d.Labels}}
			for _, r := range d.Regions {
				candidates = append(candidates, RegionStep(r))
			}
			changed := 0
			for _, p := range pairs {
				lf, err := evaluation.ReadLabelFile(p.Prediction)
				if err != nil {
					t.Fatal(err)
				}
				got := append([]uint8(nil), lf.Labels...)
				if err := plan.Apply(got, lf.Header.Shape); err != nil {
					t.Fatal(err)
				}
				if string(got) != string(lf.Labels) {
					changed++
				}
				for _, sub := range []string{"nnunet_postprocessed", "nnunet_applied"} {
					if w := readLabels(t, filepath.Join(dir, sub, p.Name)); string(got) != string(w) {
						t.Errorf("%s: the plan's output differs from %s", p.Name, sub)
					}
				}
				for i, s := range candidates {
					got := append([]uint8(nil), lf.Labels...)
					if err := (&Plan{Steps: []Step{s}}).Apply(got, lf.Header.Shape); err != nil {
						t.Fatal(err)
					}
					w := readLabels(t, filepath.Join(dir, "nnunet_each", strconv.Itoa(i), p.Name))
					if string(got) != string(w) {
						t.Errorf("%s: candidate %d (%+v) alone differs from nnU-Net's", p.Name, i, s)
					}
				}
			}
			if changed == 0 {
				t.Error("the plan changed no prediction: the label maps cannot tell a step was applied")
			}
		})
	}
}
