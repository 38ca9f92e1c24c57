package runlog

import (
	"bytes"
	"fmt"
	"image/color"
	"image/png"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/voxtrain/voxtrain/internal/atomicfile"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// palette is colour-blind safe (Okabe–Ito).
var palette = []color.Color{
	color.RGBA{0, 114, 178, 255}, color.RGBA{213, 94, 0, 255}, color.RGBA{0, 158, 115, 255},
	color.RGBA{204, 121, 167, 255}, color.RGBA{230, 159, 0, 255}, color.RGBA{86, 180, 233, 255},
	color.RGBA{0, 0, 0, 255},
}

// DiceSmoothing is the weight of the previous value in the mean Dice's
// exponential moving average (EMA): ema = 0.6·ema + 0.4·Dice at each
// validation, starting at the first Dice (TensorBoard's default smoothing;
// nnU-Net's 0.9 suits its 1000 validations, not a run of a few dozen).
const DiceSmoothing = 0.6

// Plot size: the axes and, right of them, the legend.
const (
	plotWidth  = 8 * vg.Inch
	plotHeight = 4 * vg.Inch
	legendGap  = vg.Length(10) // points between the axes, the legend and the edge
)

type series struct {
	name string
	xy   plotter.XYs
	// dashed draws a line without points (a smoothed curve).
	dashed bool
}

// figure is one file of curves over the epochs.
type figure struct {
	name, title, ylabel string
	// ymin, ymax bound the y range where set (NaN: from the data; data
	// beyond a bound still shows).
	ymin, ymax float64
	series     []series
}

// PlotOptions are what a run knows besides its metrics.
type PlotOptions struct {
	// ClassNames names the foreground classes in the per-class Dice's
	// order: ClassNames[k] is class k+1's (ValDice[k]); a missing or empty
	// name shows as "class k+1". See ClassNames.
	ClassNames []string
}

// ClassNames turns a dataset's label names (class index → name, as
// data.Dataset.LabelNames has them from dataset.json) into PlotOptions'
// ClassNames: the names of classes 1, 2, … up to the highest named one
// ("" where a class has none). Nil when no foreground class is named.
func ClassNames(labels map[int]string) []string {
	n := 0
	for k, name := range labels {
		if k > n && name != "" {
			n = k
		}
	}
	if n == 0 {
		return nil
	}
	out := make([]string, n)
	for k := 1; k <= n; k++ {
		out[k-1] = labels[k]
	}
	return out
}

// ClassName is foreground class k+1's name in names, else "class k+1".
func ClassName(names []string, k int) string {
	if k < len(names) && names[k] != "" {
		return names[k]
	}
	return fmt.Sprintf("class %d", k+1)
}

// EMA returns the exponential moving average of ys with the given weight
// of the previous value: out[0] = ys[0], out[i] = smoothing·out[i−1] +
// (1−smoothing)·ys[i].
func EMA(ys []float64, smoothing float64) []float64 {
	out := make([]float64, len(ys))
	for i, y := range ys {
		if i == 0 {
			out[i] = y
			continue
		}
		out[i] = smoothing*out[i-1] + (1-smoothing)*y
	}
	return out
}

// Plot draws the epochs' curves into dir (see PlotWith), numbering the
// classes.
func Plot(epochs []Epoch, dir string) ([]string, error) {
	return PlotWith(epochs, dir, PlotOptions{})
}

// PlotWith draws loss.png, dice.png, lr.png and timing.png from the
// epochs into dir and returns the files written. Dice is skipped when no
// epoch validated, the learning rate when no epoch recorded one. The
// x axis counts whole epochs; each legend stands right of its axes.
func PlotWith(epochs []Epoch, dir string, o PlotOptions) ([]string, error) {
	if len(epochs) == 0 {
		return nil, fmt.Errorf("plot: no epochs to plot")
	}
	var written []string
	for _, fig := range figures(epochs, o) {
		if !fig.hasData() {
			continue
		}
		p, legend, err := fig.plot()
		if err != nil {
			return written, err
		}
		path := filepath.Join(dir, fig.name)
		if err := savePlot(p, legend, path); err != nil {
			return written, fmt.Errorf("plot: save %s: %w", path, err)
		}
		written = append(written, path)
	}
	return written, nil
}

// figures gathers the curves of each file: loss, Dice (mean, its EMA and
// per class), learning rate and the time split.
func figures(epochs []Epoch, o PlotOptions) []figure {
	train := series{name: "train loss"}
	val := series{name: "validation loss"}
	diceMean := series{name: "mean Dice"}
	var perClass []series
	lr := series{name: "learning rate"}
	wait, cp, comp, valT := series{name: "data wait"}, series{name: "host→device copy"}, series{name: "compute"}, series{name: "validation"}
	anyLR := false
	for _, e := range epochs {
		x := float64(e.Epoch)
		add(&train, x, float64(e.TrainLoss))
		if e.ValLoss != nil {
			add(&val, x, float64(*e.ValLoss))
		}
		if e.ValDiceMean != nil {
			add(&diceMean, x, float64(*e.ValDiceMean))
		}
		for c, d := range e.ValDice {
			for len(perClass) <= c {
				perClass = append(perClass, series{name: ClassName(o.ClassNames, len(perClass))})
			}
			add(&perClass[c], x, float64(d))
		}
		add(&lr, x, e.LR)
		anyLR = anyLR || e.LR != 0
		add(&wait, x, e.Timing.DataWaitS)
		add(&cp, x, e.Timing.CopyS)
		add(&comp, x, e.Timing.ComputeS)
		add(&valT, x, e.Timing.ValidationS)
	}
	ema := series{name: fmt.Sprintf("mean Dice EMA, smoothing %g", DiceSmoothing), dashed: true}
	ys := make([]float64, len(diceMean.xy))
	for i, p := range diceMean.xy {
		ys[i] = p.Y
	}
	for i, y := range EMA(ys, DiceSmoothing) {
		ema.xy = append(ema.xy, plotter.XY{X: diceMean.xy[i].X, Y: y})
	}
	if !anyLR {
		lr.xy = nil // a metrics file from before the learning rate was recorded
	}
	nan := math.NaN()
	return []figure{
		{name: "loss.png", title: "Loss", ylabel: "loss", ymin: nan, ymax: nan, series: []series{train, val}},
		{name: "dice.png", title: "Validation Dice", ylabel: "Dice", ymin: 0, ymax: 1, series: append([]series{diceMean, ema}, perClass...)},
		{name: "lr.png", title: "Learning rate (at each epoch's end)", ylabel: "learning rate", ymin: 0, ymax: nan, series: []series{lr}},
		{name: "timing.png", title: "Where each epoch's time goes", ylabel: "seconds", ymin: 0, ymax: nan, series: []series{wait, cp, comp, valT}},
	}
}

func (f *figure) hasData() bool {
	for _, s := range f.series {
		if len(s.xy) > 0 {
			return true
		}
	}
	return false
}

// plot builds the figure's axes and, apart from them, its legend (drawn
// beside the axes by draw, never over the curves: the plot's own Legend
// stays empty).
func (f *figure) plot() (*plot.Plot, *plot.Legend, error) {
	p := plot.New()
	p.Title.Text = f.title
	p.X.Label.Text = "epoch"
	p.X.Tick.Marker = epochTicks{}
	p.Y.Label.Text = f.ylabel
	// Before Add, which widens the range to the data.
	if !math.IsNaN(f.ymin) {
		p.Y.Min = f.ymin
	}
	if !math.IsNaN(f.ymax) {
		p.Y.Max = f.ymax
	}
	p.Add(plotter.NewGrid())
	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	legend.Padding = vg.Points(2)
	for i, ser := range f.series {
		if len(ser.xy) == 0 {
			continue
		}
		c := palette[i%len(palette)]
		if ser.dashed {
			l, err := plotter.NewLine(ser.xy)
			if err != nil {
				return nil, nil, fmt.Errorf("plot %s: %w", f.name, err)
			}
			l.Color, l.Width, l.Dashes = c, vg.Points(2), []vg.Length{vg.Points(5), vg.Points(3)}
			p.Add(l)
			legend.Add(ser.name, l)
			continue
		}
		l, pts, err := plotter.NewLinePoints(ser.xy)
		if err != nil {
			return nil, nil, fmt.Errorf("plot %s: %w", f.name, err)
		}
		l.Color, pts.Color = c, c
		l.Width = vg.Points(1.5)
		pts.Shape = draw.CircleGlyph{}
		pts.Radius = vg.Points(1.5)
		p.Add(l, pts)
		legend.Add(ser.name, l)
	}
	return p, &legend, nil
}

// layout splits c between the axes, on the left, and the legend, in a
// column right of them, its top level with the top of the data area: the
// legend never covers a curve, however the curves run.
func layout(p *plot.Plot, legend *plot.Legend, c draw.Canvas) (axes, leg draw.Canvas) {
	w := legend.Rectangle(c).Size().X
	axes = draw.Crop(c, 0, -(w + 2*legendGap), 0, 0)
	data := p.DataCanvas(axes)
	leg = c
	leg.Min.X = axes.Max.X + legendGap
	leg.Max.X = leg.Min.X + w
	leg.Min.Y, leg.Max.Y = data.Min.Y, data.Max.Y
	return axes, leg
}

// savePlot draws p with its legend beside it and writes it to path in the
// format its extension names (png, svg, pdf, …), atomically: plot.Save
// truncates and rewrites the file in place, so a viewer refreshing it
// while training runs (or a crash) saw a torn image, and a hard-linked
// copy changed with it. The file gets the umask's permissions, as
// plot.Save's os.Create gave.
func savePlot(p *plot.Plot, legend *plot.Legend, path string) error {
	format := strings.TrimPrefix(strings.ToLower(filepath.Ext(path)), ".")
	var cv vg.CanvasWriterTo
	if format == "png" {
		cv = fastPNG{vgimg.New(plotWidth, plotHeight)}
	} else {
		var err error
		if cv, err = draw.NewFormattedCanvas(plotWidth, plotHeight, format); err != nil {
			return err
		}
	}
	axes, leg := layout(p, legend, draw.New(cv))
	p.Draw(axes)
	legend.Draw(leg)
	f, err := atomicfile.CreateUmask(path, 0o666)
	if err != nil {
		return err
	}
	defer f.Close() // discards the temporary file unless committed
	if _, err := cv.WriteTo(f); err != nil {
		return err
	}
	return f.Commit()
}

// fastPNG writes its canvas as PNG at zlib's fastest level. vgimg's
// PngCanvas uses the default level, which spends most of a plot's time
// compressing a few kilobytes of flat colour: four plots at the end of
// every run (and in every training test) for files a few percent smaller.
type fastPNG struct{ *vgimg.Canvas }

// WriteTo implements io.WriterTo.
func (c fastPNG) WriteTo(w io.Writer) (int64, error) {
	var b bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&b, c.Image()); err != nil {
		return 0, err
	}
	return b.WriteTo(w)
}

// epochTicks marks whole epochs on the x axis: every epoch, or every 2nd,
// 5th, 10th, 20th, … so that at most 10 are labelled, with unlabelled
// ticks at the epochs between when they are few. (gonum's default ticks
// fall on fractions: 1, 1.5, 2 for a two-epoch run.)
type epochTicks struct{}

// Ticks implements plot.Ticker.
func (epochTicks) Ticks(min, max float64) []plot.Tick {
	lo, hi := math.Ceil(min), math.Floor(max)
	if !(lo <= hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return nil
	}
	step := 1.0
	for i := 0; (hi-lo)/step > 9; i++ {
		step *= []float64{2, 2.5, 2}[i%3] // 1, 2, 5, 10, 20, 50, …
	}
	var ticks []plot.Tick
	minor := step > 1 && (hi-lo) <= 50
	for v := lo; v <= hi; v++ {
		switch {
		case math.Mod(v, step) == 0:
			ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', 0, 64)})
		case minor:
			ticks = append(ticks, plot.Tick{Value: v})
		}
		if !minor && step > 1 {
			v = math.Ceil((v+1)/step)*step - 1 // to the next multiple of step
		}
	}
	return ticks
}

// add appends a finite point.
func add(s *series, x, y float64) {
	if math.IsNaN(y) || math.IsInf(y, 0) {
		return
	}
	s.xy = append(s.xy, plotter.XY{X: x, Y: y})
}
