package main

import (
	"context"
	"errors"
	"os"
	"syscall"

	"github.com/voxtrain/voxtrain/trainer"
)

// The process's exit statuses, for schedulers and requeue wrappers (the
// README's table and the root command's help list them).
const (
	// exitOK: the command succeeded; a training run completed its epochs.
	exitOK = 0
	// exitFailed: an error; nothing says resuming would help.
	exitFailed = 1
	// exitStopped: a training run stopped early without a signal (the
	// --stop-after-steps limit) after saving last: run the resume command
	// to continue. 75 is sysexits' EX_TEMPFAIL, "try again later".
	exitStopped = 75
	// exitSignal plus the signal's number (SIGINT 130, SIGTERM 143, the
	// shell's convention for a process a signal stopped): a training run
	// finished its step and saved last first; another command just stopped.
	exitSignal = 128
)

// exitStatuser is an error that carries its own exit status: `train
// launch`'s failed child's.
type exitStatuser interface{ ExitStatus() int }

// exitCode maps a command's error to the exit status; cause is the
// context's cause (an interruptSignal when a signal cancelled it, else
// nil). An interruption is told from a failure by type: a training run's
// *trainer.Interrupted, or another command's context.Canceled after a
// signal. An error with an ExitStatus (a launched process's) exits with
// it. Any other error fails, even after a signal (a save that failed
// while stopping must not look resumable).
func exitCode(err, cause error) int {
	if err == nil {
		return exitOK
	}
	var sig interruptSignal
	var in *trainer.Interrupted
	var st exitStatuser
	switch {
	case errors.As(err, &st):
		return st.ExitStatus()
	case errors.As(err, &in):
		if errors.As(in.Cause, &sig) {
			return exitSignal + int(sig.sig)
		}
		return exitStopped
	case errors.Is(err, context.Canceled) && errors.As(cause, &sig):
		return exitSignal + int(sig.sig)
	}
	return exitFailed
}

// exitStatus is a finished child process's status as a shell reports
// it: its exit code, or 128 + the signal that killed it (train launch
// and train sweep report their children's with it).
func exitStatus(ps *os.ProcessState) int {
	if ps == nil {
		return exitFailed
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitSignal + int(ws.Signal())
	}
	return ps.ExitCode()
}
