// Package runlog is a training run's metrics log: one JSON object per epoch
// appended to metrics.jsonl in the run directory, read back for plots and
// for resuming, and drawn as PNG curves (loss, Dice, time split) with
// gonum/plot; optionally the same values as TensorBoard scalars
// (TensorBoard, tensorboard.go).
package runlog

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"github.com/voxtrain/voxtrain/internal/jsonfloat"
)

// Float is a float64 that is written as JSON null when NaN or infinite (a
// Dice of a class absent from every validation case is NaN); null reads
// back as NaN.
type Float = jsonfloat.Float

// Timing splits an epoch's wall time. The parts are measured on the
// training loop's thread: DataWait is time blocked on the next batch (the
// GPU starving), Copy the host→device upload not hidden under compute,
// Compute forward/backward/optimiser, Validation the validation pass.
type Timing struct {
	EpochS      float64 `json:"epoch_s"`
	DataWaitS   float64 `json:"data_wait_s"`
	CopyS       float64 `json:"copy_s"`
	ComputeS    float64 `json:"compute_s"`
	ValidationS float64 `json:"validation_s"`
}

// GPU is the NVML sample averaged over the epoch, when NVML is available.
type GPU struct {
	UtilPct     float64 `json:"util_pct"`
	MemUsedMiB  float64 `json:"mem_used_mib"`
	MemTotalMiB float64 `json:"mem_total_mib"`
	PowerW      float64 `json:"power_w"`
	TempC       float64 `json:"temp_c"`
}

// Epoch is one line of metrics.jsonl.
type Epoch struct {
	Epoch       int     `json:"epoch"`
	Step        int64   `json:"step"`
	Time        string  `json:"time"`
	LR          float64 `json:"lr"`
	TrainLoss   Float   `json:"train_loss"`
	SamplesPerS float64 `json:"samples_per_s"`
	// Validation fields are present on epochs that validated.
	ValLoss     *Float  `json:"val_loss,omitempty"`
	ValDice     []Float `json:"val_dice,omitempty"` // per foreground class 1..K−1
	ValDiceMean *Float  `json:"val_dice_mean,omitempty"`
	ValHD95     []Float `json:"val_hd95,omitempty"`
	Timing      Timing  `json:"timing"`
	GPU         *GPU    `json:"gpu,omitempty"`
	ETAS        float64 `json:"eta_s"`
}

// Append writes e as one line at the end of path (created if missing) and
// syncs it, so a crash loses at most the line being written.
func Append(path string, e Epoch) error {
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode metrics for epoch %d: %w", e.Epoch, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("append metrics: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("append metrics to %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return f.Close()
}

// Read returns the epochs in path in epoch order. When an epoch appears more
// than once (a run resumed from an earlier checkpoint repeats epochs) the
// last line wins. A torn last line (a crash mid-write) is ignored; a bad line
// elsewhere is an error naming the line.
func Read(path string) ([]Epoch, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	defer f.Close()
	byEpoch := map[int]Epoch{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	var pendingErr error
	line := 0
	for sc.Scan() {
		line++
		if pendingErr != nil {
			return nil, pendingErr
		}
		if len(sc.Bytes()) == 0 {
			continue
		}
		var e Epoch
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			pendingErr = fmt.Errorf("%s line %d: %w", path, line, err)
			continue
		}
		byEpoch[e.Epoch] = e
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	out := make([]Epoch, 0, len(byEpoch))
	for _, e := range byEpoch {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Epoch < out[j].Epoch })
	return out, nil
}
