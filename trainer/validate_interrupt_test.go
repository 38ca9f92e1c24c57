package trainer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/cpu"
)

// TestInterruptDuringValidationKeepsScore: a run cancelled (as SIGTERM
// does) just as epoch 2's validation starts, then resumed, ends with
// metrics.jsonl holding each epoch exactly once, each with its validation
// Dice, and the same training loss, validation loss and Dice as a run
// never interrupted; with worker goroutines and without (the synchronous
// stream, which positions a resumed cursor differently).
func TestInterruptDuringValidationKeepsScore(t *testing.T) {
	if testing.Short() {
		t.Skip("trains five times")
	}
	const epochs, interruptAt = 3, 2
	straight := tinyConfig(t, t.TempDir())
	straight.Train.Epochs = epochs
	want := metricsLines(t, runTiny(t, straight, Options{}).RunDir)
	if len(want) != epochs {
		t.Fatalf("uninterrupted run wrote %d metrics lines, want %d", len(want), epochs)
	}
	for _, workers := range []int{2, 0} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			c := tinyConfig(t, t.TempDir())
			c.Train.Epochs = epochs
			c.Data.Workers = config.Workers{N: workers, Set: true}
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			sigterm := errors.New("test: SIGTERM during validation")
			res, err := Run(ctx, c, Options{Device: cpu.New(cpu.Options{Threads: 2}), Out: io.Discard,
				beforeValidation: func(epoch int) {
					if epoch == interruptAt {
						cancel(sigterm)
					}
				}})
			var in *Interrupted
			if !errors.As(err, &in) || !errors.Is(err, sigterm) {
				t.Fatalf("interrupted run returned %v, want an *Interrupted caused by %v", err, sigterm)
			}
			if res == nil || !res.Interrupted || res.Epochs != interruptAt-1 {
				t.Fatalf("interrupted run: %+v, want %d completed epochs", res, interruptAt-1)
			}
			resumed := runTiny(t, c, Options{Resume: "auto"})
			if resumed.Interrupted || resumed.Epochs != epochs {
				t.Fatalf("resumed run: %+v", resumed)
			}
			got := metricsLines(t, resumed.RunDir)
			if len(got) != epochs {
				t.Fatalf("metrics.jsonl has %d lines after the resume, want one per epoch (%d): %v", len(got), epochs, got)
			}
			for i, e := range got {
				if e.Epoch != i+1 {
					t.Fatalf("line %d is epoch %d, want %d", i+1, e.Epoch, i+1)
				}
				if e.ValDiceMean == nil || len(e.ValDice) == 0 {
					t.Errorf("epoch %d lost its validation score: %+v", e.Epoch, e)
				}
				if g, w := scores(e), scores(want[i]); g != w {
					t.Errorf("epoch %d: got %s, the uninterrupted run %s", e.Epoch, g, w)
				}
			}
		})
	}
}
