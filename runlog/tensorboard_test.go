package runlog

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/voxtrain/voxtrain/internal/tbevent"
)

var update = flag.Bool("update", false, "rewrite testdata/tensorboard/ (then rerun testdata/make_tb_fixture.py)")

// fixtureRuns are the fixed inputs of testdata/tensorboard/: a run that
// records epochs 1–3 (10 steps each), then a resume from the checkpoint of
// epoch 2 (step 20) that records epochs 3 and 4 again. Epoch 2 validates
// with a class absent (NaN Dice, infinite HD95) and has a GPU sample; the
// copy time is 0 (still a value).
type fixtureRun struct {
	start  time.Time
	from   int64
	epochs []Epoch
	walls  []time.Time
}

func fixtureRuns() []fixtureRun {
	at := func(sec int64, ms int64) time.Time { return time.Unix(sec, ms*1e6) }
	ep := func(n int, loss, lr float64) Epoch {
		return Epoch{Epoch: n, Step: int64(10 * n), LR: lr, TrainLoss: Float(loss), SamplesPerS: 12.5 + float64(n),
			Timing: Timing{EpochS: 60.25, DataWaitS: 0.125, CopyS: 0, ComputeS: 58.5, ValidationS: 0}, ETAS: 3600 - 60*float64(n)}
	}
	e1 := ep(1, 1.2345678, 0.01)
	e2 := ep(2, 0.9876543, 0.0099)
	e2.ValLoss, e2.ValDiceMean = f(0.61), f(0.8123456789)
	e2.ValDice = []Float{0.8123456789, Float(math.NaN())}
	e2.ValHD95 = []Float{3.5, Float(math.Inf(1))}
	e2.Timing.ValidationS = 4.75
	e2.GPU = &GPU{UtilPct: 97, MemUsedMiB: 10240.5, MemTotalMiB: 81559, PowerW: 612.3, TempC: 61}
	e3a := ep(3, 0.8, 0.0098) // orphaned by the resume
	e3 := ep(3, 0.7777, 0.0098)
	e4 := ep(4, 0.6666, 0.0097)
	e4.ValLoss, e4.ValDiceMean = f(0.5), f(0.85)
	e4.ValDice = []Float{0.9, 0.8}
	e4.ValHD95 = []Float{2.25, 4}
	return []fixtureRun{
		{start: at(1700000000, 250), from: 0, epochs: []Epoch{e1, e2, e3a},
			walls: []time.Time{at(1700000060, 500), at(1700000125, 0), at(1700000185, 125)}},
		{start: at(1700003600, 750), from: 20, epochs: []Epoch{e3, e4},
			walls: []time.Time{at(1700003661, 0), at(1700003726, 875)}},
	}
}

// writeFixture writes the fixture's event files into dir and returns
// their paths in name order.
func writeFixture(t *testing.T, dir string) []string {
	t.Helper()
	for _, r := range fixtureRuns() {
		tb, err := OpenTensorBoard(dir, r.start, r.from)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range r.epochs {
			if err := tb.Write(e, r.walls[i]); err != nil {
				t.Fatal(err)
			}
		}
		if err := tb.Close(); err != nil {
			t.Fatal(err)
		}
	}
	files, err := tbevent.Files(dir)
	if err != nil || len(files) != 2 {
		t.Fatalf("event files %v, %v", files, err)
	}
	return files
}

// tbPoint is a scalar as testdata/make_tb_fixture.py dumped it: step, wall
// time and value (a string for NaN and ±Inf, which JSON lacks).
type tbPoint struct {
	Step     int64
	WallTime float64
	Value    float32
}

func (p *tbPoint) UnmarshalJSON(b []byte) error {
	var raw [3]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if err := json.Unmarshal(raw[0], &p.Step); err != nil {
		return err
	}
	if err := json.Unmarshal(raw[1], &p.WallTime); err != nil {
		return err
	}
	var v float64
	if err := json.Unmarshal(raw[2], &v); err != nil {
		var s string
		if json.Unmarshal(raw[2], &s) != nil {
			return err
		}
		if v, err = strconv.ParseFloat(s, 64); err != nil {
			return err
		}
	}
	// The value was a float32 (simple_value) widened to a double: exact.
	p.Value = float32(v)
	return nil
}

// TestTensorBoardFixture: the event files written from fixed inputs are
// byte-identical to the committed ones, and the committed JSON — what
// TensorBoard's own readers (its data provider, which serves the Scalars
// dashboard, and the EventAccumulator) saw in those files — lists exactly
// the scalars written: every tag, and per tag the steps, wall times and
// float32 values, the resume's START having replaced epoch 3.
func TestTensorBoardFixture(t *testing.T) {
	dir := t.TempDir()
	files := writeFixture(t, dir)
	fixtureDir := filepath.Join("testdata", "tensorboard")
	if *update {
		os.RemoveAll(fixtureDir)
		os.MkdirAll(fixtureDir, 0o755)
		for i, p := range files {
			b, _ := os.ReadFile(p)
			name := fmt.Sprintf("events.out.tfevents.%d.fixture.0.voxtrain", fixtureRuns()[i].start.Unix())
			if err := os.WriteFile(filepath.Join(fixtureDir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Log("rewrote testdata/tensorboard: rerun testdata/make_tb_fixture.py")
	}
	committed, err := tbevent.Files(fixtureDir)
	if err != nil || len(committed) != len(files) {
		t.Fatalf("committed event files %v, %v", committed, err)
	}
	for i := range files {
		got, _ := os.ReadFile(files[i])
		want, err := os.ReadFile(committed[i])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from %s (%d vs %d bytes)", files[i], committed[i], len(got), len(want))
		}
	}

	// The scalars written, merged as TensorBoard merges a directory.
	want := map[string][]tbPoint{}
	for ri, r := range fixtureRuns() {
		for i, e := range r.epochs {
			if ri == 0 && e.Step > fixtureRuns()[1].from {
				continue // dropped by the resume's START
			}
			for _, v := range Scalars(e) {
				want[v.Tag] = append(want[v.Tag], tbPoint{e.Step, tbevent.Seconds(r.walls[i]), v.Simple})
			}
		}
	}
	if len(want) != 21 || len(want["train/loss"]) != 4 || len(want["val/dice/class_2"]) != 2 || len(want["gpu/temp_c"]) != 1 {
		t.Fatalf("fixture inputs changed: %d tags", len(want))
	}
	// Our own reader agrees.
	ours, err := tbevent.ReadScalars(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	oursAsTB := map[string][]tbPoint{}
	for tag, pts := range ours {
		for _, p := range pts {
			oursAsTB[tag] = append(oursAsTB[tag], tbPoint{p.Step, p.WallTime, p.Value})
		}
	}
	sameScalars(t, "tbevent.ReadScalars", oursAsTB, want)

	b, err := os.ReadFile(filepath.Join("testdata", "tensorboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var seen struct {
		TensorBoardVersion string                          `json:"tensorboard_version"`
		DataProvider       map[string]map[string][]tbPoint `json:"data_provider"`
		EventAccumulator   map[string][]tbPoint            `json:"event_accumulator"`
	}
	if err := json.Unmarshal(b, &seen); err != nil {
		t.Fatal(err)
	}
	if seen.TensorBoardVersion == "" || len(seen.DataProvider) != 1 {
		t.Fatalf("tensorboard %q, runs %d", seen.TensorBoardVersion, len(seen.DataProvider))
	}
	for run, scalars := range seen.DataProvider {
		sameScalars(t, "TensorBoard's data provider, run "+run, scalars, want)
	}
	sameScalars(t, "TensorBoard's EventAccumulator", seen.EventAccumulator, want)
}

// sameScalars checks got has exactly want's tags and, per tag, the same
// points in order (values equal as float32, NaN to NaN).
func sameScalars(t *testing.T, who string, got, want map[string][]tbPoint) {
	t.Helper()
	tags := func(m map[string][]tbPoint) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	if g, w := tags(got), tags(want); !slices.Equal(g, w) {
		t.Errorf("%s: tags\n %s\nwant\n %s", who, strings.Join(g, " "), strings.Join(w, " "))
		return
	}
	for tag, wp := range want {
		gp := got[tag]
		ok := len(gp) == len(wp)
		for i := 0; ok && i < len(wp); i++ {
			ok = gp[i].Step == wp[i].Step && gp[i].WallTime == wp[i].WallTime &&
				(math.Float32bits(gp[i].Value) == math.Float32bits(wp[i].Value) || (isNaN32(gp[i].Value) && isNaN32(wp[i].Value)))
		}
		if !ok {
			t.Errorf("%s: %s is %v, want %v", who, tag, gp, wp)
		}
	}
}

func isNaN32(v float32) bool { return v != v }

// TestScalarsOfAnEpoch: every value of the record becomes a tag, in
// metrics.jsonl's units; validation and GPU tags only where the record
// has them.
func TestScalarsOfAnEpoch(t *testing.T) {
	runs := fixtureRuns()
	plain, validated := runs[0].epochs[0], runs[0].epochs[1]
	got := map[string]float32{}
	for _, v := range Scalars(validated) {
		got[v.Tag] = v.Simple
	}
	for tag, want := range map[string]float64{
		"epoch": 2, "train/loss": 0.9876543, "train/lr": 0.0099, "train/samples_per_s": 14.5, "val/loss": 0.61,
		"val/dice_mean": 0.8123456789, "val/dice/class_1": 0.8123456789, "val/hd95/class_1": 3.5,
		"time/epoch_s": 60.25, "time/data_wait_s": 0.125, "time/copy_s": 0, "time/compute_s": 58.5,
		"time/validation_s": 4.75, "time/eta_s": 3480, "gpu/util_pct": 97, "gpu/mem_used_mib": 10240.5,
		"gpu/mem_total_mib": 81559, "gpu/power_w": 612.3, "gpu/temp_c": 61,
	} {
		if v, ok := got[tag]; !ok || v != float32(want) {
			t.Errorf("%s = %v (present %v), want %v", tag, v, ok, float32(want))
		}
	}
	if !isNaN32(got["val/dice/class_2"]) || !math.IsInf(float64(got["val/hd95/class_2"]), 1) || len(got) != 21 {
		t.Errorf("absent class: dice %v, hd95 %v; %d tags", got["val/dice/class_2"], got["val/hd95/class_2"], len(got))
	}
	for _, v := range Scalars(plain) {
		if strings.HasPrefix(v.Tag, "val/") || strings.HasPrefix(v.Tag, "gpu/") {
			t.Errorf("epoch without validation or GPU has %s", v.Tag)
		}
	}
}

// TestOpenTensorBoardErrorNamesThePath: a tensorboard directory that
// cannot be made is an error naming it.
func TestOpenTensorBoardErrorNamesThePath(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	_, err := OpenTensorBoard(filepath.Join(file, "tensorboard"), time.Unix(1, 0), 0)
	if err == nil || !strings.Contains(err.Error(), file) {
		t.Fatalf("err = %v", err)
	}
}
