package runlog

import (
	"bufio"
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/plot/vg/draw"
)

// testEpochs are n epochs with a poly learning rate, validated every
// second epoch, with two classes (the second absent in epoch 4: NaN).
func testEpochs(n int) []Epoch {
	var eps []Epoch
	for e := 1; e <= n; e++ {
		rec := Epoch{Epoch: e, Step: int64(e * 10), LR: 0.01 * math.Pow(1-float64(e)/float64(n+1), 0.9),
			TrainLoss: Float(1 / float64(e)), Timing: Timing{EpochS: 2, DataWaitS: 0.1, ComputeS: 1.8, ValidationS: 0.1}}
		if e%2 == 0 {
			d := 0.3 + 0.5*math.Sin(float64(e))*math.Sin(float64(e))
			rec.ValLoss = f(1.2 / float64(e))
			rec.ValDice = []Float{Float(d), Float(d / 2)}
			if e == 4 {
				rec.ValDice[1] = Float(math.NaN())
			}
			rec.ValDiceMean = f(d)
		}
		eps = append(eps, rec)
	}
	return eps
}

func figureNamed(t *testing.T, figs []figure, name string) figure {
	t.Helper()
	for _, f := range figs {
		if f.name == name {
			return f
		}
	}
	t.Fatalf("no figure %s", name)
	return figure{}
}

// TestLearningRatePlot: lr.png is written, and its curve is metrics.jsonl's
// lr of every epoch, read from the file's lines as they are.
func TestLearningRatePlot(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "metrics.jsonl")
	for _, e := range testEpochs(7) {
		if err := Append(path, e); err != nil {
			t.Fatal(err)
		}
	}
	eps, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	files, err := Plot(eps, dir)
	if err != nil {
		t.Fatal(err)
	}
	lrPNG := filepath.Join(dir, "lr.png")
	if !strings.Contains(strings.Join(files, " "), lrPNG) {
		t.Errorf("wrote %v, want lr.png among them", files)
	}
	fh, err := os.Open(lrPNG)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := png.Decode(fh); err != nil {
		t.Fatalf("lr.png: %v", err)
	}

	raw, _ := os.Open(path)
	defer raw.Close()
	want := map[float64]float64{}
	sc := bufio.NewScanner(raw)
	for sc.Scan() {
		var line struct {
			Epoch int     `json:"epoch"`
			LR    float64 `json:"lr"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		want[float64(line.Epoch)] = line.LR
	}
	lr := figureNamed(t, figures(eps, PlotOptions{}), "lr.png")
	if len(lr.series) != 1 || len(lr.series[0].xy) != len(want) {
		t.Fatalf("lr figure %+v, want one curve of %d points", lr.series, len(want))
	}
	for _, p := range lr.series[0].xy {
		if w, ok := want[p.X]; !ok || p.Y != w {
			t.Errorf("lr curve at epoch %v: %v, metrics.jsonl has %v", p.X, p.Y, w)
		}
	}
	// A metrics file without the learning rate draws no lr.png.
	dir2 := t.TempDir()
	files, err = Plot([]Epoch{{Epoch: 1, TrainLoss: 1}, {Epoch: 2, TrainLoss: 0.5}}, dir2)
	if err != nil || len(files) != 2 {
		t.Errorf("without lr: wrote %v, %v; want loss and timing only", files, err)
	}
}

// TestEMA: the exponential moving average, and the Dice plot's smoothed
// curve is that of the mean Dice of the validated epochs, its legend
// giving the smoothing factor.
func TestEMA(t *testing.T) {
	close := func(a, b []float64) bool {
		if len(a) != len(b) {
			return false
		}
		for i := range a {
			if math.Abs(a[i]-b[i]) > 1e-12 {
				return false
			}
		}
		return true
	}
	ys := []float64{0.2, 0.6, 0.4, 1}
	for _, tc := range []struct {
		s    float64
		want []float64
	}{
		{0.6, []float64{0.2, 0.36, 0.376, 0.6256}},
		{0.9, []float64{0.2, 0.24, 0.256, 0.3304}},
		{0, ys},
		{1, []float64{0.2, 0.2, 0.2, 0.2}},
	} {
		if got := EMA(ys, tc.s); !close(got, tc.want) {
			t.Errorf("EMA(%v, %v) = %v, want %v", ys, tc.s, got, tc.want)
		}
	}
	if got := EMA(nil, 0.6); len(got) != 0 {
		t.Errorf("EMA of nothing: %v", got)
	}

	eps := testEpochs(9)
	dice := figureNamed(t, figures(eps, PlotOptions{}), "dice.png")
	var mean, ema *series
	for i := range dice.series {
		switch s := &dice.series[i]; {
		case s.name == "mean Dice":
			mean = s
		case strings.Contains(s.name, "EMA"):
			ema = s
		}
	}
	if mean == nil || ema == nil {
		t.Fatalf("dice curves %+v: want the mean and its EMA", dice.series)
	}
	if !strings.Contains(ema.name, strconv.FormatFloat(DiceSmoothing, 'g', -1, 64)) {
		t.Errorf("EMA legend %q does not give the smoothing factor %v", ema.name, DiceSmoothing)
	}
	var xs, raw []float64
	for _, e := range eps {
		if e.ValDiceMean != nil {
			xs = append(xs, float64(e.Epoch))
			raw = append(raw, float64(*e.ValDiceMean))
		}
	}
	want := EMA(raw, DiceSmoothing)
	if len(ema.xy) != len(want) || len(mean.xy) != len(raw) {
		t.Fatalf("EMA curve %v, mean %v; want %d points", ema.xy, mean.xy, len(raw))
	}
	for i, p := range ema.xy {
		if p.X != xs[i] || math.Abs(p.Y-want[i]) > 1e-12 || mean.xy[i].Y != raw[i] {
			t.Errorf("point %d: EMA (%v, %v), mean %v; want (%v, %v) over %v", i, p.X, p.Y, mean.xy[i].Y, xs[i], want[i], raw[i])
		}
	}
}

// TestLegendsBesideTheData: every figure's legend is drawn in a column
// right of its data area, inside the image and wide enough for its
// entries; the plot's own legend (drawn over the data) is empty.
func TestLegendsBesideTheData(t *testing.T) {
	for _, fig := range figures(testEpochs(12), PlotOptions{}) {
		p, legend, err := fig.plot()
		if err != nil {
			t.Fatal(err)
		}
		cv, err := draw.NewFormattedCanvas(plotWidth, plotHeight, "png")
		if err != nil {
			t.Fatal(err)
		}
		c := draw.New(cv)
		axes, leg := layout(p, legend, c)
		data := p.DataCanvas(axes)
		need := legend.Rectangle(c).Size()
		switch {
		case need.X <= 0:
			t.Errorf("%s: the legend has no entries", fig.name)
		case leg.Min.X < data.Max.X || leg.Min.X < axes.Max.X:
			t.Errorf("%s: legend from x=%v, the data area ends at %v (axes at %v)", fig.name, leg.Min.X, data.Max.X, axes.Max.X)
		case leg.Max.X > c.Max.X || leg.Max.X-leg.Min.X < need.X:
			t.Errorf("%s: legend column %v–%v, needs %v within %v", fig.name, leg.Min.X, leg.Max.X, need.X, c.Max.X)
		case leg.Max.Y > c.Max.Y || leg.Max.Y-leg.Min.Y < need.Y:
			t.Errorf("%s: legend column height %v, needs %v", fig.name, leg.Max.Y-leg.Min.Y, need.Y)
		case !legend.Top || !legend.Left:
			t.Errorf("%s: legend anchored top %v left %v, want at the top left of its column", fig.name, legend.Top, legend.Left)
		}
		if w := p.Legend.Rectangle(c).Size().X; w != 0 {
			t.Errorf("%s: the plot's own legend, drawn over the data, has entries (%v wide)", fig.name, w)
		}
		if data.Max.X-data.Min.X < (c.Max.X-c.Min.X)/2 {
			t.Errorf("%s: the data area is %v of %v wide", fig.name, data.Max.X-data.Min.X, c.Max.X-c.Min.X)
		}
	}
}

// TestEpochTicksAreIntegers: the x axis of every figure is labelled with
// whole epochs only, at most 10 of them, at least 2 where the range holds
// 2 epochs.
func TestEpochTicksAreIntegers(t *testing.T) {
	for _, fig := range figures(testEpochs(2), PlotOptions{}) {
		p, _, err := fig.plot()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := p.X.Tick.Marker.(epochTicks); !ok {
			t.Errorf("%s: x ticks by %T, want epochTicks", fig.name, p.X.Tick.Marker)
		}
	}
	for _, r := range [][2]float64{{1, 2}, {0, 2}, {1, 7}, {1, 16}, {2, 30}, {1, 250}, {1, 1000}, {3.5, 7.2}, {0.2, 0.8}, {1, 99999}} {
		ticks := epochTicks{}.Ticks(r[0], r[1])
		var labels []float64
		for _, tk := range ticks {
			if tk.Value != math.Trunc(tk.Value) || tk.Value < r[0] || tk.Value > r[1] {
				t.Errorf("range %v: tick at %v", r, tk.Value)
			}
			if tk.Label == "" {
				continue
			}
			if v, err := strconv.Atoi(tk.Label); err != nil || float64(v) != tk.Value {
				t.Errorf("range %v: tick %v labelled %q", r, tk.Value, tk.Label)
			}
			labels = append(labels, tk.Value)
		}
		whole := math.Floor(r[1]) - math.Ceil(r[0]) + 1
		if len(labels) > 10 || whole >= 2 && len(labels) < 2 || whole < 1 && len(labels) != 0 {
			t.Errorf("range %v: labelled %v", r, labels)
		}
	}
	got := epochTicks{}.Ticks(1, 2)
	if len(got) != 2 || got[0].Label != "1" || got[1].Label != "2" {
		t.Errorf("two epochs: ticks %+v, want 1 and 2", got)
	}
}

// TestClassNamesInLegends: the per-class Dice curves are named as the
// dataset names its labels, numbered where it does not.
func TestClassNamesInLegends(t *testing.T) {
	names := func(o PlotOptions) []string {
		var out []string
		for _, s := range figureNamed(t, figures(testEpochs(4), o), "dice.png").series {
			out = append(out, s.name)
		}
		return out[2:] // after the mean and its EMA
	}
	for _, tc := range []struct {
		labels map[int]string
		want   string
	}{
		{map[int]string{0: "background", 1: "Anterior", 2: "Posterior"}, "Anterior,Posterior"},
		{map[int]string{2: "Posterior"}, "class 1,Posterior"},
		{map[int]string{0: "background"}, "class 1,class 2"},
		{nil, "class 1,class 2"},
	} {
		if got := strings.Join(names(PlotOptions{ClassNames: ClassNames(tc.labels)}), ","); got != tc.want {
			t.Errorf("labels %v: Dice legend %s, want %s", tc.labels, got, tc.want)
		}
	}
	if got := ClassNames(map[int]string{0: "background", 1: "tumour", 3: "oedema"}); strings.Join(got, ",") != "tumour,,oedema" {
		t.Errorf("ClassNames with a gap: %q", got)
	}
	if got := ClassNames(map[int]string{0: "background"}); got != nil {
		t.Errorf("ClassNames of the background alone: %q", got)
	}
}

// BenchmarkPlot draws the four plots of a 100-epoch run, as training does
// at its end and `train plot` does:
//
//	go test ./runlog -run '^$' -bench Plot -benchtime 10x
func BenchmarkPlot(b *testing.B) {
	eps := testEpochs(100)
	dir := b.TempDir()
	for b.Loop() {
		if _, err := Plot(eps, dir); err != nil {
			b.Fatal(err)
		}
	}
}
