package infer

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/internal/atomicfile"
	"github.com/voxtrain/voxtrain/internal/npy"
)

// Job is one case to predict and where its outputs go.
type Job struct {
	Case data.Case
	// Labels is the label file written (uint8 NIfTI on the grid of the
	// case's first image, with its header); Probabilities, when not
	// empty, the .npz of the class probabilities on that grid (see
	// WriteProbabilities).
	Labels, Probabilities string
}

// RunOptions say how Run predicts its jobs.
type RunOptions struct {
	// Window holds the overlap and mirroring.
	Window config.Validation
	// Log receives a line per case written ("[3/20] case_003  1.8 s") and
	// the total (nil: none).
	Log io.Writer
	// Postprocess, when not nil, is applied to every case's label map on
	// the input's grid (shape (D, H, W)) after argmax and before it is
	// written: the place for connected-component post-processing.
	Postprocess func(labels []uint8, shape [3]int) error
	// Ahead is how many cases are read and preprocessed ahead of the one
	// predicted (1 or 2; 0 means 1).
	Ahead int
}

// RunStats is what Run did.
type RunStats struct {
	Cases   int           // cases written
	Elapsed time.Duration // wall-clock time of the whole run
}

// loaded is a case read (or its error) handed from the reader.
type loaded struct {
	i    int
	vol  *data.Volume
	err  error
	read time.Duration
}

// predicted is a case's outputs handed to the writer.
type predicted struct {
	i      int
	labels []uint8
	probs  []float32
	shape  [3]int
	took   time.Duration // reading is not counted: it overlaps the previous case
}

// Run predicts the jobs in order with e and writes their outputs. Memory
// stays bounded by a few cases whatever their number: one case is on the
// device at a time; a goroutine reads and preprocesses the next (Ahead
// cases at most queued), and another writes the previous one's files while
// the current one is predicted. Every file is written atomically (a
// temporary name renamed into place), the probabilities before the labels,
// so a label file that exists is whole and so is the .npz beside it.
//
// When ctx ends Run stops between cases, or between batches of patches of
// the case being predicted, lets the writer finish the case it holds, and
// returns ctx's error: no output is ever half-written. The first error of
// a case (reading, predicting, writing) stops the run the same way and is
// returned naming the case.
func (e *Ensemble) Run(ctx context.Context, jobs []Job, o RunOptions) (RunStats, error) {
	start := time.Now()
	ahead := o.Ahead
	if ahead < 1 {
		ahead = 1
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	reads := make(chan loaded, ahead-1)
	go func() {
		defer close(reads)
		for i, j := range jobs {
			if ctx.Err() != nil {
				return
			}
			t := time.Now()
			v, err := e.ReadCase(j.Case)
			select {
			case reads <- loaded{i: i, vol: v, err: err, read: time.Since(t)}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()

	// The writer takes one case at a time (an unbuffered channel): at most
	// one case's outputs wait in memory while the next is predicted.
	writes := make(chan predicted)
	werr := make(chan error, 1)
	written := 0
	go func() {
		defer close(werr)
		for p := range writes {
			t := time.Now()
			if err := writeJob(jobs[p.i], p); err != nil {
				werr <- fmt.Errorf("case %s: %w", jobs[p.i].Case.ID, err)
				cancel()
				for range writes { // drain so the sender never blocks
				}
				return
			}
			written++
			if o.Log != nil {
				fmt.Fprintf(o.Log, "[%d/%d] %s  %.1f s (write %.1f s)\n", p.i+1, len(jobs), jobs[p.i].Case.ID,
					p.took.Seconds(), time.Since(t).Seconds())
			}
		}
	}()

	err := e.predictAll(ctx, jobs, reads, writes, o)
	close(writes)
	if we := <-werr; we != nil {
		err = we // the writer's error caused the others
	}
	// Let the reader see the end and exit.
	cancel()
	for range reads {
	}
	st := RunStats{Cases: written, Elapsed: time.Since(start)}
	if o.Log != nil && written > 0 {
		fmt.Fprintf(o.Log, "%d cases in %.1f s (%.1f s a case)\n", written, st.Elapsed.Seconds(), st.Elapsed.Seconds()/float64(written))
	}
	return st, err
}

// predictAll predicts every case the reader hands over and gives its
// outputs to the writer.
func (e *Ensemble) predictAll(ctx context.Context, jobs []Job, reads <-chan loaded, writes chan<- predicted, o RunOptions) error {
	for range jobs {
		var l loaded
		select {
		case l0, ok := <-reads:
			if !ok {
				return ctx.Err()
			}
			l = l0
		case <-ctx.Done():
			return ctx.Err()
		}
		j := jobs[l.i]
		if l.err != nil {
			return fmt.Errorf("case %s: %w", j.Case.ID, l.err)
		}
		t := time.Now()
		p, err := e.predictCase(ctx, l.vol, j.Probabilities != "", o)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("case %s (%s): %w", j.Case.ID, j.Case.Images[0], err)
		}
		p.i, p.took = l.i, time.Since(t)
		// A case predicted whole is written even when ctx has just ended:
		// the writer always takes it (it drains after its own error).
		writes <- p
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// predictCase is one case's work on the device and after: mapped onto
// the input's grid as nnU-Net exports a prediction — one model's logits,
// as validate maps them (Model.predictExported), or the mean of several
// members' probabilities so exported (Ensemble.exportMean) — then
// post-processing.
func (e *Ensemble) predictCase(ctx context.Context, v *data.Volume, keepProbs bool, o RunOptions) (predicted, error) {
	var x exported
	if len(e.Members) == 1 {
		var err error
		if x, err = e.Members[0].predictExported(ctx, v, o.Window, keepProbs); err != nil {
			return predicted{}, err
		}
	} else {
		var err error
		if x, err = e.exportMean(ctx, v, o.Window, keepProbs); err != nil {
			return predicted{}, err
		}
	}
	if o.Postprocess != nil {
		if err := o.Postprocess(x.labels, x.shape); err != nil {
			return predicted{}, fmt.Errorf("post-processing: %w", err)
		}
	}
	return predicted{labels: x.labels, probs: x.probs, shape: x.shape}, nil
}

// writeJob writes a case's probabilities (when asked) and then its labels.
func writeJob(j Job, p predicted) error {
	if j.Probabilities != "" {
		if err := WriteProbabilities(j.Probabilities, p.probs, p.shape); err != nil {
			return err
		}
	}
	return WriteLabels(j.Labels, j.Case.Images[0], p.labels)
}

// ProbabilitiesName is the array name in the .npz WriteProbabilities
// writes (nnU-Net's name for it too).
const ProbabilitiesName = "probabilities"

// WriteProbabilities writes probs, c classes of the D·H·W voxels of shape
// (channel-major, W fastest), to path as an .npz holding one float32
// array "probabilities" of shape (C, D, H, W), written atomically:
//
//	p = np.load("case.npz")["probabilities"]   # p[c, z, y, x]
//
// D, H, W are the NIfTI file's z, y, x (its dim[3], dim[2], dim[1]): the
// axes reversed against nibabel's get_fdata() (x, y, z), the same order
// as SimpleITK's GetArrayFromImage and nnU-Net's own .npz, so
// p.transpose(0, 3, 2, 1) lines up with nibabel's array.
func WriteProbabilities(path string, probs []float32, shape [3]int) error {
	n := shape[0] * shape[1] * shape[2]
	if n == 0 || len(probs)%n != 0 {
		return fmt.Errorf("write %s: %d probabilities for the %d voxels of %v", path, len(probs), n, shape)
	}
	c := len(probs) / n
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	f, err := atomicfile.CreateUmask(path, 0o666)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer f.Close()
	arr := npy.Array{Shape: []int{c, shape[0], shape[1], shape[2]}, Data: probs}
	if err := npy.WriteNPZ(f, npy.Named{Name: ProbabilitiesName, Array: arr}); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Commit(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
