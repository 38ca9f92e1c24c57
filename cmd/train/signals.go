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
// SIGTERM (a run then finishes its step, saves last and returns) and a
// channel closed by the second (main then exits at once; the last saved
// checkpoint is intact). stop stops catching signals.
func signalContext(errw io.Writer) (ctx context.Context, abandon <-chan struct{}, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	gone := make(chan struct{})
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		n := 0
		for sig := range ch {
			n++
			if n == 1 {
				fmt.Fprintf(errw, "\n%v: finishing the current step and saving last (again to abandon at once)\n", sig)
				cancel()
				continue
			}
			fmt.Fprintf(errw, "\n%v again: abandoning the run; the last saved checkpoint is intact\n", sig)
			close(gone)
			return
		}
	}()
	return ctx, gone, func() { signal.Stop(ch); cancel() }
}

func fprintf(w io.Writer, format string, a ...any) { fmt.Fprintf(w, format, a...) }
