package databench

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/voxtrain/voxtrain/data"
)

// CPUModel returns the CPU model name (Linux), or GOARCH.
func CPUModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "model name") {
				if i := strings.Index(line, ":"); i >= 0 {
					return strings.TrimSpace(line[i+1:])
				}
			}
		}
	}
	return runtime.GOARCH
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/1e6) }

// Summary is the median over repeats of one (source, workers) pair.
type Summary struct {
	Source              string
	Workers             int
	Runs                []Result
	SPS, SPSMin, SPSMax float64
	Steady              float64
	FirstBatch          time.Duration
	Gap, Interval       time.Duration
	Wait                float64
	Stage               [len(data.StageNames)]time.Duration
	PeakRSS             int64
	CPUPerSample        time.Duration
	SteadyWait          float64
	Digests             []string
}

// Summarize groups results by worker count and takes medians.
func Summarize(rs []Result) []Summary {
	var order []int
	by := map[int][]Result{}
	for _, r := range rs {
		if _, ok := by[r.Workers]; !ok {
			order = append(order, r.Workers)
		}
		by[r.Workers] = append(by[r.Workers], r)
	}
	var out []Summary
	for _, w := range order {
		g := by[w]
		s := Summary{Source: g[0].Source, Workers: w, Runs: g}
		med := func(f func(r Result) float64) float64 {
			v := make([]float64, len(g))
			for i, r := range g {
				v[i] = f(r)
			}
			slices.Sort(v)
			return v[len(v)/2]
		}
		s.SPS = med(func(r Result) float64 { return r.SamplesPerSec })
		s.SPSMin, s.SPSMax = s.SPS, s.SPS
		for _, r := range g {
			s.SPSMin, s.SPSMax = min(s.SPSMin, r.SamplesPerSec), max(s.SPSMax, r.SamplesPerSec)
			s.Digests = append(s.Digests, r.Digest)
			s.PeakRSS = max(s.PeakRSS, r.PeakRSS)
		}
		s.Steady = med(func(r Result) float64 { return r.SteadyPerSec })
		s.FirstBatch = time.Duration(med(func(r Result) float64 { return float64(r.FirstBatch) }))
		s.Gap = time.Duration(med(func(r Result) float64 {
			if len(r.Gaps) == 0 {
				return 0
			}
			t := time.Duration(0)
			for _, x := range r.Gaps {
				t += x
			}
			return float64(t / time.Duration(len(r.Gaps)))
		}))
		s.Interval = time.Duration(med(func(r Result) float64 { return float64(r.Interval) }))
		s.Wait = med(func(r Result) float64 { return r.WaitFraction() })
		s.SteadyWait = med(func(r Result) float64 { return r.SteadyWaitFraction() })
		s.CPUPerSample = time.Duration(med(func(r Result) float64 { return float64(r.CPU) / float64(max(r.Samples, 1)) }))
		for i := range s.Stage {
			s.Stage[i] = time.Duration(med(func(r Result) float64 { return float64(r.Stage[i]) }))
		}
		out = append(out, s)
	}
	return out
}

// WriteTable prints a Markdown table of the summaries.
func WriteTable(w io.Writer, ss []Summary, consumerMs float64) {
	fmt.Fprintf(w, "| source | workers | samples/s (min-max) | samples/s after epoch 1 | CPU ms/sample | first batch ms | epoch gap ms | median batch interval ms | consumer wait %% (after 1st batch) |")
	for _, n := range data.StageNames {
		fmt.Fprintf(w, " %s ms/sample |", n)
	}
	fmt.Fprintln(w, " peak RSS MiB |")
	fmt.Fprint(w, "|---|---|---|---|---|---|---|---|---|")
	for range data.StageNames {
		fmt.Fprint(w, "---|")
	}
	fmt.Fprintln(w, "---|")
	for _, s := range ss {
		wk := fmt.Sprint(s.Workers)
		if s.Workers < 0 {
			wk = fmt.Sprintf("auto (%d)", s.Runs[len(s.Runs)-1].Active)
		}
		fmt.Fprintf(w, "| %s | %s | %.2f (%.2f-%.2f) | %.2f | %s | %s | %s | %s | %.2f (%.2f) |", s.Source, wk, s.SPS, s.SPSMin, s.SPSMax,
			s.Steady, ms(s.CPUPerSample), ms(s.FirstBatch), ms(s.Gap), ms(s.Interval), 100*s.Wait, 100*s.SteadyWait)
		for _, d := range s.Stage {
			fmt.Fprintf(w, " %s |", ms(d))
		}
		fmt.Fprintf(w, " %.0f |\n", float64(s.PeakRSS)/(1<<20))
	}
	if consumerMs > 0 {
		fmt.Fprintf(w, "\nConsumer: a simulated step of %.1f ms per batch (sleep).\n", consumerMs)
	}
}

// WriteDigests prints each configuration's digests and whether they agree.
func WriteDigests(w io.Writer, ss []Summary) bool {
	all := map[string]bool{}
	for _, s := range ss {
		for i, d := range s.Digests {
			fmt.Fprintf(w, "digest %s workers=%d run=%d: %s\n", s.Source, s.Workers, i, d) // -1 = auto
			all[d] = true
		}
	}
	same := len(all) == 1
	if same {
		fmt.Fprintln(w, "digests: identical across all runs")
	} else {
		fmt.Fprintf(w, "digests: %d different values\n", len(all))
	}
	return same
}
