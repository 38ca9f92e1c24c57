// Command train trains 3D U-Nets on NIfTI volumes with a data pipeline that
// keeps the GPU fed. See the README for the commands.
//
// Each command lives in its own file, shaped like cli/cli (gh): an Options
// struct, NewCmdX(f, runF) building the cobra command from the Factory f
// (IO streams, device opening), and xRun(opts) doing the work, so a test
// runs any command in process and checks its flag handling by passing its
// own runF.
package main

import (
	"context"
	"fmt"
	"os"
)

// main is the only place the process exits: with the status exitCode
// gives the command's error (0 finished, 1 failed, 128+signal interrupted
// after saving last, 75 stopped by --stop-after-steps), or at once with
// 128+signal on a second SIGINT/SIGTERM (the first one lets the command
// finish its step and save; see signalContext).
func main() {
	ctx, abandon, stop := signalContext(os.Stderr)
	done := make(chan error, 1)
	go func() { done <- NewCmdRoot(newFactory()).ExecuteContext(ctx) }()
	select {
	case err := <-done:
		code := exitCode(err, context.Cause(ctx)) // before stop, which cancels ctx without a signal
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "train:", err)
		}
		os.Exit(code)
	case sig := <-abandon:
		os.Exit(exitSignal + int(sig))
	}
}
