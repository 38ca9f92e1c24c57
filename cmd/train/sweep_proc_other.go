//go:build !unix

package main

import "os/exec"

// detachChild does nothing where there are no process groups.
func detachChild(cmd *exec.Cmd) {}
