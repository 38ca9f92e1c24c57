//go:build unix && !linux

package main

import (
	"os/exec"
	"syscall"
)

// detachChild puts a sweep's job in its own process group, so that the
// terminal's Ctrl-C reaches the sweep alone, which passes it on once (a
// job that got it twice would abandon its save). Without Linux's
// parent-death signal, a second Ctrl-C exits the sweep and leaves the
// jobs to finish saving last.
func detachChild(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
