package main

import "syscall"

// childSysProcAttr puts each of launch's children in its own process
// group, so a terminal's ^C reaches launch alone (which passes it on
// once: a second one would make the training abandon its step), and has
// Linux send it SIGTERM should launch die.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
