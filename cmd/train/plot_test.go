package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/evaluation"
	"github.com/voxtrain/voxtrain/infer"
	"github.com/voxtrain/voxtrain/runlog"
)

// TestPlotNamesTheClasses: `train plot` finds the class names of a run
// through its config.yaml's dataset (the demo's dataset.json: Anterior,
// Posterior) for the Dice legends, and draws every plot, lr.png included;
// a run directory without config.yaml is plotted with numbered classes
// and no complaint.
func TestPlotNamesTheClasses(t *testing.T) {
	run := t.TempDir()
	cfg, err := os.ReadFile(writeConfig(t, "train:\n  patch_size: [16, 16, 16]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(run, "config.yaml"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	d := runlog.Float(0.5)
	for e := 1; e <= 3; e++ {
		rec := runlog.Epoch{Epoch: e, LR: 0.01 / float64(e), TrainLoss: 1, ValDiceMean: &d, ValDice: []runlog.Float{0.4, 0.6}}
		if err := runlog.Append(filepath.Join(run, "metrics.jsonl"), rec); err != nil {
			t.Fatal(err)
		}
	}
	names, err := runClassNames(run)
	if err != nil || !slices.Equal(names, []string{"Anterior", "Posterior"}) {
		t.Errorf("class names %q, %v; want Anterior, Posterior", names, err)
	}
	out, errb, err := runCmd(t, "plot", run)
	if err != nil || errb.Len() > 0 {
		t.Fatalf("plot: %v, stderr %q", err, errb)
	}
	for _, f := range []string{"loss.png", "dice.png", "lr.png", "timing.png"} {
		if !strings.Contains(out.String(), filepath.Join(run, "plots", f)) {
			t.Errorf("plot output %q lacks %s", out, f)
		}
	}

	if err := os.Remove(filepath.Join(run, "config.yaml")); err != nil {
		t.Fatal(err)
	}
	if names, err := runClassNames(run); names != nil || err != nil {
		t.Errorf("without config.yaml: %q, %v; want no names, no error", names, err)
	}
	if _, errb, err := runCmd(t, "plot", run); err != nil || errb.Len() > 0 {
		t.Errorf("plot without config.yaml: %v, stderr %q", err, errb)
	}
}

// TestPrintScoresNamesTheClasses: validate's and demo's per-class lines
// carry the dataset's label names where it has them, the index alone
// where it does not.
func TestPrintScoresNamesTheClasses(t *testing.T) {
	cases := make([]evaluation.Case, 3)
	for i := range cases {
		cases[i].Metrics = []evaluation.Metrics{{Dice: 0.8 + 0.01*float64(i), HD95: 1.5}, {Dice: 0.79, HD95: 2 + 0.25*float64(i)}}
	}
	s := infer.Summarise(3, map[int]string{2: "Posterior", 1: "ignored"}, true, cases)
	var b bytes.Buffer
	printScores(&b, s, []string{"Anterior"})
	want := "3 cases\n  class 1 (Anterior): mean Dice 0.8100  mean HD95 1.50\n  class 2 (Posterior): mean Dice 0.7900  mean HD95 2.25\nmean Dice over classes: 0.8000\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	s.Names = nil
	printScores(&b, s, nil)
	if !strings.Contains(b.String(), "  class 2: mean Dice 0.7900") {
		t.Errorf("unnamed classes:\n%s", b.String())
	}
}
