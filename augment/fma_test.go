package augment

import (
	"os/exec"
	"regexp"
	"testing"
)

// TestNoFusedMultiplyAdd compiles this package for architectures whose Go
// compiler fuses x*y+z into one instruction (arm64, and amd64 at
// GOAMD64=v3) and fails if any fused instruction comes from this package:
// fusion changes the last bits, and the output must be the same bytes on
// every machine. Every product that feeds a sum needs an explicit
// conversion (see detmath.go).
func TestNoFusedMultiplyAdd(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the package twice")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool")
	}
	fused := regexp.MustCompile(`\((/[^)]*/augment/[a-z0-9_]+\.go:\d+)\)\s+(VFN?M(ADD|SUB)\w*|FN?M(ADD|SUB)[SD]?)\s`)
	for _, env := range [][]string{{"GOARCH=arm64"}, {"GOARCH=amd64", "GOAMD64=v3"}} {
		cmd := exec.Command(goBin, "build", "-gcflags=-S", "-o", "/dev/null", ".")
		cmd.Env = append(cmd.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", env, err, out)
		}
		for _, m := range fused.FindAllSubmatch(out, 10) {
			t.Errorf("%v: fused multiply-add %s at %s", env, m[2], m[1])
		}
	}
}
