package runlog

import (
	"bytes"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/voxtrain/voxtrain/internal/testutil"
)

func f(v float64) *Float { x := Float(v); return &x }

func TestAppendReadAndPlot(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "metrics.jsonl")
	for e := 1; e <= 4; e++ {
		rec := Epoch{Epoch: e, Step: int64(e * 10), LR: 0.01, TrainLoss: Float(1 / float64(e)), Timing: Timing{EpochS: 2, DataWaitS: 0.1, ComputeS: 1.8}}
		if e%2 == 0 {
			rec.ValLoss = f(1.2 / float64(e))
			rec.ValDice = []Float{Float(0.5 + 0.1*float64(e)), Float(math.NaN())}
			rec.ValDiceMean = f(0.5 + 0.1*float64(e))
		}
		if err := Append(path, rec); err != nil {
			t.Fatal(err)
		}
	}
	// A resumed run repeats epoch 4 with a different loss: last line wins.
	if err := Append(path, Epoch{Epoch: 4, TrainLoss: 0.2}); err != nil {
		t.Fatal(err)
	}
	// A torn final line from a crash is ignored.
	fh, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	fh.WriteString(`{"epoch": 5, "train_lo`)
	fh.Close()
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got[3].TrainLoss != 0.2 || got[1].ValDiceMean == nil || !math.IsNaN(float64(got[1].ValDice[1])) {
		t.Fatalf("read back %+v", got)
	}
	files, err := Plot(got, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 {
		t.Fatalf("wrote %v, want loss, dice, lr and timing", files)
	}
	for _, p := range files {
		fh, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(fh)
		fh.Close()
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if b := img.Bounds(); b.Dx() < 100 || b.Dy() < 100 {
			t.Fatalf("%s: %v", p, b)
		}
	}
}

func TestReadRejectsCorruptMiddleLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	os.WriteFile(path, []byte("{\"epoch\":1}\nnot json\n{\"epoch\":2}\n"), 0o644)
	if _, err := Read(path); err == nil {
		t.Fatal("corrupt line accepted")
	}
}

// TestPlotReplacesFilesAtomically: plots are written beside and renamed
// over the previous ones, never rewritten in place: a hard-linked copy of
// an earlier plot (or a viewer holding it open) keeps its image, and no
// temporary file is left.
func TestPlotReplacesFilesAtomically(t *testing.T) {
	dir := t.TempDir()
	eps := []Epoch{{Epoch: 1, TrainLoss: 1}, {Epoch: 2, TrainLoss: 0.5}}
	if _, err := Plot(eps, dir); err != nil {
		t.Fatal(err)
	}
	loss := filepath.Join(dir, "loss.png")
	before, err := os.ReadFile(loss)
	if err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(t.TempDir(), "kept.png")
	if err := os.Link(loss, keep); err != nil {
		t.Skip("no hard links here:", err)
	}
	eps = append(eps, Epoch{Epoch: 3, TrainLoss: 0.1})
	if _, err := Plot(eps, dir); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(loss)
	kept, _ := os.ReadFile(keep)
	if bytes.Equal(after, before) {
		t.Fatal("the new loss.png is the old one")
	}
	if !bytes.Equal(kept, before) {
		t.Error("rewriting loss.png changed a hard-linked copy of it: written in place, not replaced")
	}
	names := testutil.DirNames(t, dir)
	if !slices.Equal(names, []string{"loss.png", "timing.png"}) {
		t.Errorf("plots folder holds %v, want loss.png and timing.png only", names)
	}
}
