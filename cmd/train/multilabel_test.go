package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTrainMultiLabelManifest trains sigmoid multi-label outputs on a
// manifest whose crops give one binary array per class, the two classes
// overlapping: the loss falls and validation (patches, then sliding
// window over the held-out crops) reports one Dice per class.
func TestTrainMultiLabelManifest(t *testing.T) {
	dir := t.TempDir()
	// Class a where a slab pattern holds, class b on a band that overlaps
	// it; the raw shows both (a adds 100, b adds 50), so a model can learn.
	a := func(z, y, x int) bool { return (z/3+y/4+x/5)%3 == 0 }
	b := func(z, y, x int) bool { return (y+x)%8 < 3 }
	bin := func(f func(z, y, x int) bool) func(z, y, x int) float32 {
		return func(z, y, x int) float32 { return map[bool]float32{true: 1}[f(z, y, x)] }
	}
	writeOMEZarr(t, filepath.Join(dir, "raw.zarr"), [3]int{32, 40, 48}, [3]float64{}, false,
		func(z, y, x int) float32 { return 100*bin(a)(z, y, x) + 50*bin(b)(z, y, x) + float32((z+y+x)%7) })
	los := [][3]int{{4, 8, 8}, {16, 20, 24}, {2, 2, 30}}
	var crops strings.Builder
	for k, lo := range los {
		id := []string{"c1", "c2", "c3"}[k]
		for name, f := range map[string]func(z, y, x int) bool{"a": a, "b": b} {
			writeOMEZarr(t, filepath.Join(dir, id, name+".zarr"), [3]int{12, 16, 16}, [3]float64{}, true,
				func(z, y, x int) float32 { return bin(f)(lo[0]+z, lo[1]+y, lo[2]+x) })
		}
		fmt.Fprintf(&crops, "      - {labels: {a: %s/a.zarr, b: %s/b.zarr}, offset: [%d, %d, %d]}\n", id, id, lo[0], lo[1], lo[2])
	}
	manifest := "classes: {a: 0, b: 1}\nvolumes:\n  - raw: raw.zarr\n    crops:\n" + crops.String()
	if err := os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "run.yaml")
	err := os.WriteFile(cfgPath, []byte("experiment: multi\nseed: 3\ndata:\n  manifest: manifest.yaml\n  fold: 0\n  num_folds: 3\n  workers: 2\n  normalization: [zscore]\n"+
		"model:\n  num_classes: 2\n  targets: multi_label\n  features: [4, 8]\nloss:\n  name: dice_bce\noptim:\n  name: adamw\n  lr: 0.01\n"+
		"train:\n  epochs: 6\n  iterations_per_epoch: 3\n  patch_size: [8, 16, 16]\n  batch_size: 2\n"+
		// Both: the patches' pseudo-Dice, then the whole held-out crops by
		// sliding window, scored class by class (what val_dice keeps).
		"validation:\n  mode: both\n"), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	runs := filepath.Join(dir, "runs")
	if out, errb, err := runCmd(t, "--config", cfgPath, "--output-dir", runs, "--threads", "2"); err != nil {
		t.Fatalf("training: %v\n%s\n%s", err, out, errb)
	}
	f, err := os.Open(filepath.Join(runs, "multi", "fold_0", "run_0", "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, m)
	}
	if len(lines) < 2 {
		t.Fatalf("%d metrics lines, want one per epoch", len(lines))
	}
	first, _ := lines[0]["train_loss"].(float64)
	last, _ := lines[len(lines)-1]["train_loss"].(float64)
	dice, _ := lines[len(lines)-1]["val_dice"].([]any)
	t.Logf("train loss %v → %v, validation Dice %v", first, last, dice)
	for _, d := range dice {
		if x, ok := d.(float64); !ok || x < 0.3 || x > 1 {
			t.Fatalf("validation Dice %v: want each class's sliding-window Dice in [0.3, 1] (the patches gave about 0.69)", dice)
		}
	}
	if !(last < first) || len(dice) != 2 {
		t.Fatalf("train loss %v → %v, last validation Dice %v: want a falling loss and one Dice per class", first, last, dice)
	}
}

// TestTrainMultiLabelUnknownClasses trains on a manifest whose crops
// annotate different classes (unlisted_classes: unknown): c2 lists only
// a, c3 only b, the held-out c4 only a, though b's band runs through all
// of them. The loss falls, and the validation — patches (their counts
// per sample, c4's b in none), and whole crops by sliding window — scores
// b NaN (null in metrics.jsonl: its only case leaves it out), a as usual,
// the mean Dice being a's.
func TestTrainMultiLabelUnknownClasses(t *testing.T) {
	for _, mode := range []string{"patch", "both"} {
		t.Run(mode, func(t *testing.T) { trainUnknownClasses(t, mode) })
	}
}

func trainUnknownClasses(t *testing.T, mode string) {
	dir := t.TempDir()
	a := func(z, y, x int) bool { return (z/3+y/4+x/5)%3 == 0 }
	b := func(z, y, x int) bool { return (y+x)%8 < 3 }
	bin := func(f func(z, y, x int) bool) func(z, y, x int) float32 {
		return func(z, y, x int) float32 { return map[bool]float32{true: 1}[f(z, y, x)] }
	}
	writeOMEZarr(t, filepath.Join(dir, "raw.zarr"), [3]int{32, 40, 48}, [3]float64{}, false,
		func(z, y, x int) float32 { return 100*bin(a)(z, y, x) + 50*bin(b)(z, y, x) + float32((z+y+x)%7) })
	crops := []struct {
		id      string
		lo      [3]int
		classes []string
	}{
		{"c1", [3]int{4, 8, 8}, []string{"a", "b"}},
		{"c2", [3]int{16, 20, 24}, []string{"a"}},
		{"c3", [3]int{2, 2, 30}, []string{"b"}},
		{"c4", [3]int{18, 2, 2}, []string{"a"}},
	}
	var list strings.Builder
	for _, c := range crops {
		var labels []string
		for _, name := range c.classes {
			f := map[string]func(z, y, x int) bool{"a": a, "b": b}[name]
			lo := c.lo
			writeOMEZarr(t, filepath.Join(dir, c.id, name+".zarr"), [3]int{12, 16, 16}, [3]float64{}, true,
				func(z, y, x int) float32 { return bin(f)(lo[0]+z, lo[1]+y, lo[2]+x) })
			labels = append(labels, fmt.Sprintf("%s: %s/%s.zarr", name, c.id, name))
		}
		fmt.Fprintf(&list, "      - {labels: {%s}, offset: [%d, %d, %d]}\n", strings.Join(labels, ", "), c.lo[0], c.lo[1], c.lo[2])
	}
	manifest := "classes: {a: 0, b: 1}\nunlisted_classes: unknown\nvolumes:\n  - raw: raw.zarr\n    crops:\n" + list.String()
	if err := os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	splits := `[{"train": ["c1", "c2", "c3"], "val": ["c4"]}, {"train": ["c4"], "val": ["c1", "c2", "c3"]}]`
	if err := os.WriteFile(filepath.Join(dir, "splits.json"), []byte(splits), 0o644); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "run.yaml")
	err := os.WriteFile(cfgPath, []byte("experiment: unknown\nseed: 3\ndata:\n  manifest: manifest.yaml\n  splits_file: splits.json\n  num_folds: 2\n  fold: 0\n  workers: 2\n  normalization: [zscore]\n"+
		"model:\n  num_classes: 2\n  targets: multi_label\n  features: [4, 8]\nloss:\n  name: dice_bce\noptim:\n  name: adamw\n  lr: 0.01\n"+
		"train:\n  epochs: 6\n  iterations_per_epoch: 3\n  patch_size: [8, 16, 16]\n  batch_size: 2\n"+
		"validation:\n  mode: "+mode+"\n"), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	runs := filepath.Join(dir, "runs")
	if out, errb, err := runCmd(t, "--config", cfgPath, "--output-dir", runs, "--threads", "2"); err != nil {
		t.Fatalf("training: %v\n%s\n%s", err, out, errb)
	}
	f, err := os.Open(filepath.Join(runs, "unknown", "fold_0", "run_0", "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, m)
	}
	if len(lines) < 2 {
		t.Fatalf("%d metrics lines, want one per epoch", len(lines))
	}
	first, _ := lines[0]["train_loss"].(float64)
	end := lines[len(lines)-1]
	last, _ := end["train_loss"].(float64)
	dice, _ := end["val_dice"].([]any)
	mean, _ := end["val_dice_mean"].(float64)
	t.Logf("train loss %v → %v, validation Dice %v (mean %v)", first, last, dice, mean)
	if !(last < first) || len(dice) != 2 {
		t.Fatalf("train loss %v → %v, last validation Dice %v: want a falling loss and one Dice per class", first, last, dice)
	}
	da, ok := dice[0].(float64)
	if !ok || da < 0.3 || da > 1 {
		t.Errorf("class a's validation Dice %v, want one in [0.3, 1]", dice[0])
	}
	if dice[1] != nil {
		t.Errorf("class b's validation Dice %v, want null (NaN: c4 does not annotate b)", dice[1])
	}
	if mean != da {
		t.Errorf("mean validation Dice %v, want class a's %v (NaN left out)", end["val_dice_mean"], da)
	}
}
