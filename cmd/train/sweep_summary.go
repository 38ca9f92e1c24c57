package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/voxtrain/voxtrain/checkpoint"
	"github.com/voxtrain/voxtrain/evaluation"
	"github.com/voxtrain/voxtrain/internal/atomicfile"
	"github.com/voxtrain/voxtrain/runlog"
)

// A job's status in a sweep's summary.
const (
	statusFinished    = "finished"    // its last checkpoint completed train.epochs
	statusInterrupted = "interrupted" // it has checkpoints but has not finished (or runs now)
	statusFailed      = "failed"      // its last attempt exited 1
	statusNotStarted  = "not started" // no checkpoint, no failure recorded
)

// jobStatus is one row of sweep_summary.json.
type jobStatus struct {
	Fold       int    `json:"fold"`
	RunID      int    `json:"run_id"`
	Status     string `json:"status"`
	EpochsDone int    `json:"epochs_done"`
	Epochs     int    `json:"epochs"`
	// BestValDice is the best validation mean Dice of the run
	// (metrics.jsonl, else the best checkpoint's metric); null when none.
	BestValDice *float64 `json:"best_val_dice"`
	// FinalValDice is the foreground mean Dice of the run's final
	// validation (validation.final: RUN/validation/summary.json); absent
	// when it has none.
	FinalValDice *float64 `json:"final_val_dice,omitempty"`
	// LastExit is the exit status of the job's last attempt the sweep
	// recorded (here or in a SLURM task); absent when none.
	LastExit *int   `json:"last_exit,omitempty"`
	RunDir   string `json:"run_dir"`
}

// foldStatus is a fold's line: its runs and the mean of their best Dice.
type foldStatus struct {
	Fold     int `json:"fold"`
	Runs     int `json:"runs"`
	Finished int `json:"finished"`
	// WithDice runs have a best Dice; MeanBestValDice is their mean, null
	// when none has.
	WithDice        int      `json:"runs_with_dice"`
	MeanBestValDice *float64 `json:"mean_best_val_dice"`
	// WithFinal runs have a final validation; MeanFinalValDice is the
	// mean of their Dice (absent when none has).
	WithFinal        int      `json:"runs_with_final_dice,omitempty"`
	MeanFinalValDice *float64 `json:"mean_final_val_dice,omitempty"`
}

// sweepSummary is sweep_summary.json.
type sweepSummary struct {
	Experiment string         `json:"experiment"`
	Config     string         `json:"config"`
	Epochs     int            `json:"epochs"`
	Counts     map[string]int `json:"counts"`
	Runs       []jobStatus    `json:"runs"`
	Folds      []foldStatus   `json:"folds"`
}

// exitPath is where the sweep records a job's last exit status.
func (o *SweepOptions) exitPath(j sweepJob) string {
	return filepath.Join(o.Dir(), j.name()+".exit")
}

// logPath is a local job's log.
func (o *SweepOptions) logPath(j sweepJob) string {
	return filepath.Join(o.Dir(), j.name()+".log")
}

// status reads where job j stands from its run directory: its newest
// checkpoint (epochs done; finished when it completed train.epochs at an
// epoch's end), metrics.jsonl or the best checkpoint (best Dice), and the
// exit status the sweep recorded (failed).
func (o *SweepOptions) status(j sweepJob) (jobStatus, error) {
	cfg := o.Config
	rd, err := checkpoint.RunDirAt(cfg.OutputDir, cfg.Experiment, j.Fold, j.RunID)
	if err != nil {
		return jobStatus{}, err
	}
	st := jobStatus{Fold: j.Fold, RunID: j.RunID, Epochs: cfg.Train.Epochs, RunDir: rd.Path, Status: statusNotStarted}
	latest, err := checkpoint.Latest(rd.Checkpoints)
	if err != nil && !errors.Is(err, checkpoint.ErrNoCheckpoint) {
		return st, fmt.Errorf("fold %d run %d: %w", j.Fold, j.RunID, err)
	}
	if b, err := os.ReadFile(o.exitPath(j)); err == nil {
		if code, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			st.LastExit = &code
		}
	}
	switch {
	case latest != nil && latest.Epoch >= cfg.Train.Epochs && !latest.MidEpoch:
		st.Status = statusFinished
	case st.LastExit != nil && *st.LastExit == exitFailed:
		st.Status = statusFailed
	case latest != nil || st.LastExit != nil && *st.LastExit != exitOK:
		st.Status = statusInterrupted
	}
	if latest != nil {
		st.EpochsDone = latest.Epoch
	}
	st.BestValDice = bestDice(rd)
	st.FinalValDice = finalDice(rd)
	return st, nil
}

// finalDice is the foreground mean Dice of the run's final validation
// (RUN/validation/summary.json); nil when it has none or it is NaN.
func finalDice(rd checkpoint.RunDir) *float64 {
	s, err := evaluation.Read(filepath.Join(rd.Path, "validation", "summary.json"))
	if err != nil {
		return nil
	}
	d := s.ForegroundMean.Dice
	if math.IsNaN(d) || math.IsInf(d, 0) {
		return nil
	}
	return &d
}

// bestDice is the run's best validation mean Dice: the highest in
// metrics.jsonl, else the best checkpoint's metric; nil when neither
// has one.
func bestDice(rd checkpoint.RunDir) *float64 {
	var best *float64
	if eps, err := runlog.Read(rd.Metrics); err == nil {
		for _, e := range eps {
			if e.ValDiceMean == nil {
				continue
			}
			v := float64(*e.ValDiceMean)
			if !math.IsNaN(v) && !math.IsInf(v, 0) && (best == nil || v > *best) {
				best = &v
			}
		}
	}
	if best == nil {
		if b, err := checkpoint.Best(rd.Checkpoints); err == nil {
			best = b.Metric
		}
	}
	return best
}

// summarize reads every job's status and the folds' means.
func (o *SweepOptions) summarize() (*sweepSummary, error) {
	s := &sweepSummary{Experiment: o.Experiment(), Config: o.ConfigPath, Epochs: o.Config.Train.Epochs, Counts: map[string]int{}}
	for _, st := range []string{statusFinished, statusInterrupted, statusFailed, statusNotStarted} {
		s.Counts[st] = 0
	}
	for _, j := range o.Jobs() {
		st, err := o.status(j)
		if err != nil {
			return nil, err
		}
		s.Runs = append(s.Runs, st)
		s.Counts[st.Status]++
	}
	for _, fold := range o.Folds {
		fs := foldStatus{Fold: fold}
		sum, sumFinal := 0.0, 0.0
		for _, r := range s.Runs {
			if r.Fold != fold {
				continue
			}
			fs.Runs++
			if r.Status == statusFinished {
				fs.Finished++
			}
			if r.BestValDice != nil {
				fs.WithDice++
				sum += *r.BestValDice
			}
			if r.FinalValDice != nil {
				fs.WithFinal++
				sumFinal += *r.FinalValDice
			}
		}
		if fs.WithDice > 0 {
			m := sum / float64(fs.WithDice)
			fs.MeanBestValDice = &m
		}
		if fs.WithFinal > 0 {
			m := sumFinal / float64(fs.WithFinal)
			fs.MeanFinalValDice = &m
		}
		s.Folds = append(s.Folds, fs)
	}
	return s, nil
}

// writeSweepSummary prints the summary table and writes it as
// sweep_summary.json and sweep_summary.tsv in the experiment's folder.
func writeSweepSummary(o *SweepOptions) (*sweepSummary, error) {
	s, err := o.summarize()
	if err != nil {
		return nil, err
	}
	s.print(o.IO.Out)
	if err := os.MkdirAll(o.Experiment(), 0o755); err != nil {
		return nil, fmt.Errorf("sweep summary: %w", err)
	}
	js, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, err
	}
	jsonPath := filepath.Join(o.Experiment(), "sweep_summary.json")
	if err := atomicfile.WriteFileUmask(jsonPath, append(js, '\n'), 0o666); err != nil {
		return nil, fmt.Errorf("sweep summary: %w", err)
	}
	tsvPath := filepath.Join(o.Experiment(), "sweep_summary.tsv")
	if err := atomicfile.WriteFileUmask(tsvPath, s.tsv(), 0o666); err != nil {
		return nil, fmt.Errorf("sweep summary: %w", err)
	}
	fmt.Fprintf(o.IO.Out, "summary: %s, %s\n", jsonPath, tsvPath)
	return s, nil
}

func foldName(f int) string {
	if f == -1 {
		return "all"
	}
	return strconv.Itoa(f)
}

func diceText(d *float64, none string) string {
	if d == nil {
		return none
	}
	return strconv.FormatFloat(*d, 'f', 4, 64)
}

// print writes the table: a row per job, then each fold's mean.
func (s *sweepSummary) print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "fold\trun\tstatus\tepochs\tbest val Dice\tfinal val Dice")
	for _, r := range s.Runs {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d/%d\t%s\t%s\n", foldName(r.Fold), r.RunID, r.Status, r.EpochsDone, r.Epochs,
			diceText(r.BestValDice, "-"), diceText(r.FinalValDice, "-"))
	}
	tw.Flush()
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "fold\truns\tfinished\tmean best val Dice\tmean final val Dice")
	for _, f := range s.Folds {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", foldName(f.Fold), f.Runs, f.Finished,
			meanText(f.MeanBestValDice, f.WithDice, f.Runs), meanText(f.MeanFinalValDice, f.WithFinal, f.Runs))
	}
	tw.Flush()
	fmt.Fprintf(w, "%d finished, %d interrupted, %d failed, %d not started\n", s.Counts[statusFinished],
		s.Counts[statusInterrupted], s.Counts[statusFailed], s.Counts[statusNotStarted])
}

// meanText is a fold's mean over the with of its runs that have a Dice:
// "-" for none, "(of with)" after it when some runs have none.
func meanText(mean *float64, with, runs int) string {
	t := diceText(mean, "-")
	if mean != nil && with < runs {
		t += fmt.Sprintf(" (of %d)", with)
	}
	return t
}

// tsv is sweep_summary.tsv: a header and a row per job; a missing Dice
// is an empty field.
func (s *sweepSummary) tsv() []byte {
	var b bytes.Buffer
	b.WriteString("fold\trun_id\tstatus\tepochs_done\tepochs\tbest_val_dice\tfinal_val_dice\trun_dir\n")
	for _, r := range s.Runs {
		fmt.Fprintf(&b, "%d\t%d\t%s\t%d\t%d\t%s\t%s\t%s\n", r.Fold, r.RunID, r.Status, r.EpochsDone, r.Epochs,
			diceText(r.BestValDice, ""), diceText(r.FinalValDice, ""), r.RunDir)
	}
	return b.Bytes()
}
