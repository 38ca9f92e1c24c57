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
	"fmt"
	"os"
)

// main is the only place the process exits: with the command's status,
// or at once on a second SIGINT/SIGTERM (the first one lets the command
// finish its step and save; see signalContext).
func main() {
	ctx, abandon, stop := signalContext(os.Stderr)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- NewCmdRoot(newFactory()).ExecuteContext(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			fmt.Fprintln(os.Stderr, "train:", err)
			os.Exit(1)
		}
	case <-abandon:
		os.Exit(130)
	}
}
