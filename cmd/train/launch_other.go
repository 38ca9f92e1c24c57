//go:build !linux

package main

import "syscall"

// childSysProcAttr: elsewhere than Linux the children stay in launch's
// process group (see launch_linux.go).
func childSysProcAttr() *syscall.SysProcAttr { return nil }
