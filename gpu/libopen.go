//go:build cuda

package gpu

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/voxtrain/voxtrain/gpu/internal/libpath"
)

// errNoLib marks a candidate dlopen could not open (most often: no such
// file), as opposed to one that opened and then failed.
var errNoLib = errors.New("cannot open")

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// openFirst opens a library opened at run time (cuBLAS, cuDNN, NCCL):
// try is called with each candidate path (libpath.Candidates over
// sonames, the override in the environment variable env and
// LD_LIBRARY_PATH) until one returns no error — a library that loads but
// lacks an entry point or fails to initialise is passed over for the
// next. The error names what (cuBLAS, …), every candidate that exists and
// failed (or, when none was found, where it looked), then hint.
func openFirst[T any](what string, sonames []string, env, hint string, try func(path string) (T, error)) (T, error) {
	cands := libpath.Candidates(sonames, os.Getenv(env), os.Getenv("LD_LIBRARY_PATH"), nil)
	var tried []string
	for _, p := range cands {
		l, err := try(p)
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, errNoLib) || strings.Contains(p, "/") && fileExists(p) {
			tried = append(tried, err.Error())
		}
	}
	if len(tried) == 0 {
		tried = append(tried, fmt.Sprintf("no file found among %d candidates (%s, ...; %s and LD_LIBRARY_PATH searched)",
			len(cands), strings.Join(cands[:min(4, len(cands))], ", "), env))
	}
	var zero T
	msg := fmt.Sprintf("cannot load %s (%s): %s", what, strings.Join(sonames, ", "), strings.Join(tried, "; "))
	if hint != "" {
		msg += "; " + hint
	}
	return zero, errors.New(msg)
}
