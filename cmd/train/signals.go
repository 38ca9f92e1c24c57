package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// signalContext returns a context cancelled by the first SIGINT or
// SIGTERM (a run then finishes its step, saves last and returns), with an
// interruptSignal as its cause, and a channel that delivers the second
// (main then exits at once; the last saved checkpoint is intact). stop
// stops catching signals.
func signalContext(errw io.Writer) (ctx context.Context, abandon <-chan syscall.Signal, stop func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 2)
	gone := make(chan syscall.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		n := 0
		for sig := range ch {
			n++
			s, _ := sig.(syscall.Signal)
			if n == 1 {
				fmt.Fprintf(errw, "\n%v: finishing the current step and saving last (again to abandon at once)\n", sig)
				cancel(interruptSignal{s})
				continue
			}
			fmt.Fprintf(errw, "\n%v again: abandoning the run; the last saved checkpoint is intact\n", sig)
			gone <- s
			return
		}
	}()
	return ctx, gone, func() { signal.Stop(ch); cancel(nil) }
}

// interruptSignal is the cause a signal cancels the command's context
// with. A training run carries it up inside its *trainer.Interrupted, so
// main can exit with the signal's code (see exitCode).
type interruptSignal struct{ sig syscall.Signal }

func (s interruptSignal) Error() string { return "interrupted by " + signalName(s.sig) }

// signalName is the signal's name as kill -l and schedulers' docs write
// it (Go's String says "terminated").
func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

func fprintf(w io.Writer, format string, a ...any) { fmt.Fprintf(w, format, a...) }
