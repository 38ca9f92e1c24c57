package runlog

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"strings"

	"github.com/voxtrain/voxtrain/internal/atomicfile"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// palette is colour-blind safe (Okabe–Ito).
var palette = []color.Color{
	color.RGBA{0, 114, 178, 255}, color.RGBA{213, 94, 0, 255}, color.RGBA{0, 158, 115, 255},
	color.RGBA{204, 121, 167, 255}, color.RGBA{230, 159, 0, 255}, color.RGBA{86, 180, 233, 255},
	color.RGBA{0, 0, 0, 255},
}

type series struct {
	name string
	xy   plotter.XYs
}

// Plot draws loss.png, dice.png and timing.png from the epochs into dir and
// returns the files written. Dice is skipped when no epoch validated.
func Plot(epochs []Epoch, dir string) ([]string, error) {
	if len(epochs) == 0 {
		return nil, fmt.Errorf("plot: no epochs to plot")
	}
	var written []string
	var train, val series
	train.name, val.name = "train loss", "validation loss"
	var diceMean series
	diceMean.name = "mean Dice"
	var perClass []series
	var wait, cp, comp, valT series
	wait.name, cp.name, comp.name, valT.name = "data wait", "host→device copy", "compute", "validation"
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
				perClass = append(perClass, series{name: fmt.Sprintf("class %d", len(perClass)+1)})
			}
			add(&perClass[c], x, float64(d))
		}
		add(&wait, x, e.Timing.DataWaitS)
		add(&cp, x, e.Timing.CopyS)
		add(&comp, x, e.Timing.ComputeS)
		add(&valT, x, e.Timing.ValidationS)
	}
	// legendTop places the legend where the curves are not: at the top for
	// falling curves (loss), at the bottom for rising ones (Dice).
	save := func(name, title, ylabel string, legendTop bool, s ...series) error {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = "epoch"
		p.Y.Label.Text = ylabel
		p.Legend.Top = legendTop
		p.Legend.XOffs = -vg.Points(8)
		switch name {
		case "dice.png":
			p.Y.Min, p.Y.Max = 0, 1
		case "timing.png":
			p.Y.Min = 0
		}
		p.Add(plotter.NewGrid())
		n := 0
		for i, ser := range s {
			if len(ser.xy) == 0 {
				continue
			}
			l, pts, err := plotter.NewLinePoints(ser.xy)
			if err != nil {
				return fmt.Errorf("plot %s: %w", name, err)
			}
			c := palette[i%len(palette)]
			l.Color, pts.Color = c, c
			l.Width = vg.Points(1.5)
			pts.Shape = draw.CircleGlyph{}
			pts.Radius = vg.Points(1.5)
			p.Add(l, pts)
			p.Legend.Add(ser.name, l)
			n++
		}
		if n == 0 {
			return nil
		}
		path := filepath.Join(dir, name)
		if err := savePlot(p, path); err != nil {
			return fmt.Errorf("plot: save %s: %w", path, err)
		}
		written = append(written, path)
		return nil
	}
	if err := save("loss.png", "Loss", "loss", true, train, val); err != nil {
		return written, err
	}
	if err := save("dice.png", "Validation Dice", "Dice", false, append([]series{diceMean}, perClass...)...); err != nil {
		return written, err
	}
	if err := save("timing.png", "Where each epoch's time goes", "seconds", true, wait, cp, comp, valT); err != nil {
		return written, err
	}
	return written, nil
}

// savePlot writes p to path in the format its extension names (png, svg,
// pdf, …), atomically: plot.Save truncates and rewrites the file in
// place, so a viewer refreshing it while training runs (or a crash) saw
// a torn image, and a hard-linked copy changed with it. The file gets the
// umask's permissions, as plot.Save's os.Create gave.
func savePlot(p *plot.Plot, path string) error {
	format := strings.TrimPrefix(strings.ToLower(filepath.Ext(path)), ".")
	wt, err := p.WriterTo(7*vg.Inch, 4*vg.Inch, format)
	if err != nil {
		return err
	}
	f, err := atomicfile.CreateUmask(path, 0o666)
	if err != nil {
		return err
	}
	defer f.Close() // discards the temporary file unless committed
	if _, err := wt.WriteTo(f); err != nil {
		return err
	}
	return f.Commit()
}

// add appends a finite point.
func add(s *series, x, y float64) {
	if math.IsNaN(y) || math.IsInf(y, 0) {
		return
	}
	s.xy = append(s.xy, plotter.XY{X: x, Y: y})
}
