package main

import (
	"os/exec"
	"syscall"
)

// detachChild puts a sweep's job in its own process group, so that the
// terminal's Ctrl-C reaches the sweep alone (which passes it on once: a
// job that got it twice would abandon its save), and has the kernel kill
// it when the sweep dies (a second Ctrl-C exits the sweep at once).
func detachChild(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
