package trainer

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// console is what the user watches: on a terminal a progress bar per epoch
// (samples/s, ETA, loss, data-wait share) with log lines printed above it;
// elsewhere (CI, nohup, a scheduler's log file) plain timestamped lines at
// most every LogEverySeconds. Every log line also goes to train.log, once
// setFile has opened it: the lines before are kept until then, so that a
// run refused at setup writes nothing into its directory yet its train.log
// still tells the whole story of an accepted one.
type console struct {
	mu    sync.Mutex
	out   io.Writer
	file  io.Writer    // train.log (nil: not yet)
	early bytes.Buffer // what went to train.log before file was set
	tty   bool
	bar   *progressbar.ProgressBar
	every time.Duration
	last  time.Time
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func newConsole(out io.Writer, every time.Duration) *console {
	return &console{out: out, tty: isTerminal(out), every: every}
}

// setFile sends train.log's lines to w from now on, after those logged so
// far.
func (c *console) setFile(w io.Writer) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := w.Write(c.early.Bytes()); err != nil {
		return err
	}
	c.early = bytes.Buffer{}
	c.file = w
	return nil
}

// toFile writes p to train.log, or keeps it until setFile (c.mu held).
func (c *console) toFile(p []byte) {
	if c.file == nil {
		c.early.Write(p)
		return
	}
	c.file.Write(p)
}

// Write makes the console an io.Writer for the logger: a line goes to
// train.log and, above the bar, to the screen.
func (c *console) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.toFile(p)
	if c.bar != nil {
		c.bar.Clear()
	}
	n, err := c.out.Write(p)
	if c.bar != nil {
		c.bar.RenderBlank()
	}
	return n, err
}

// logger returns a slog logger writing plain lines through the console.
func (c *console) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(c, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// startEpoch opens the epoch's progress bar (terminal only).
func (c *console) startEpoch(epoch, epochs, steps int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.tty {
		return
	}
	c.bar = progressbar.NewOptions(steps,
		progressbar.OptionSetWriter(c.out),
		progressbar.OptionSetDescription(fmt.Sprintf("epoch %d/%d", epoch, epochs)),
		progressbar.OptionShowCount(),
		progressbar.OptionSetWidth(24),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionShowDescriptionAtLineEnd(),
		progressbar.OptionClearOnFinish(),
	)
}

// progress reports a finished step.
type progress struct {
	epoch, epochs int
	step, steps   int
	loss          float64
	samplesPerS   float64
	dataWaitPct   float64
	eta           time.Duration
	gpu           string
}

func (p progress) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "loss %.4f  %.1f samples/s  data-wait %.0f%%  ETA %s", p.loss, p.samplesPerS, p.dataWaitPct, fmtDuration(p.eta))
	if p.gpu != "" {
		b.WriteString("  " + p.gpu)
	}
	return b.String()
}

func (c *console) step(p progress) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bar != nil {
		c.bar.Describe(fmt.Sprintf("epoch %d/%d  %s", p.epoch, p.epochs, p))
		c.bar.Set(p.step)
		return
	}
	if time.Since(c.last) < c.every && p.step != p.steps {
		return
	}
	c.last = time.Now()
	line := fmt.Sprintf("%s epoch %d/%d step %d/%d  %s\n", time.Now().Format(time.RFC3339), p.epoch, p.epochs, p.step, p.steps, p)
	c.out.Write([]byte(line))
	c.toFile([]byte(line))
}

func (c *console) endEpoch() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bar != nil {
		c.bar.Finish()
		c.bar = nil
	}
}

// fmtDuration prints a duration rounded for humans (1h02m, 3m05s, 12s).
func fmtDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d >= time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	case d >= time.Minute:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%ds", int(d.Seconds()+0.5))
}
