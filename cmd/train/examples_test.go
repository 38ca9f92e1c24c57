package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/voxtrain/voxtrain/internal/testutil"
)

// TestExamplePathsExist: every file a command's help example reads (a
// config, a NIfTI file, anything under configs/ or testdata/) is in the
// repository, so the examples run as written from its root. Paths the
// example writes (after an output flag), absolute paths (the user's own
// data) and runs/ (what `train demo` writes) are not checked, but runs/
// paths must be the demo's run.
func TestExamplePathsExist(t *testing.T) {
	root := testutil.RepoRoot()
	outputs := map[string]bool{"--output": true, "-o": true, "--onnx": true, "--output-dir": true, "--cpuprofile": true}
	checked := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		ex := strings.ReplaceAll(c.Example, "\\\n", " ")
		for _, line := range strings.Split(ex, "\n") {
			line = strings.TrimSpace(line)
			line, _, _ = strings.Cut(line, "|")
			if rest, ok := strings.CutPrefix(line, "go run ./cmd/train "); ok {
				line = "train " + rest
			}
			words := strings.Fields(line)
			if len(words) == 0 || words[0] != "train" {
				continue
			}
			for i, w := range words[1:] {
				prev := words[i]
				if name, path, ok := strings.Cut(w, "="); ok && !strings.HasPrefix(w, "-") && !strings.Contains(name, "/") {
					w = path // find-best's --cv NAME=DIR names DIR
				}
				if strings.HasPrefix(w, "-") || outputs[prev] || filepath.IsAbs(w) {
					continue
				}
				if !strings.Contains(w, "/") && !hasAnySuffix(w, ".yaml", ".yml", ".nii", ".nii.gz", ".json", ".onnx") {
					continue
				}
				if strings.HasPrefix(w, "runs/") {
					if !strings.HasPrefix(w, "runs/demo/fold_0/run_0") {
						t.Errorf("%s example: %s is not a run `train demo` makes", c.CommandPath(), w)
					}
					continue
				}
				m, err := filepath.Glob(filepath.Join(root, w))
				if err != nil || len(m) == 0 {
					t.Errorf("%s example %q: %s is not in the repository", c.CommandPath(), line, w)
				}
				checked++
			}
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	f, _, _ := testFactory()
	walk(NewCmdRoot(f))
	if checked < 8 {
		t.Errorf("checked %d example paths: the parser missed them", checked)
	}
}

func hasAnySuffix(s string, suffixes ...string) bool {
	for _, x := range suffixes {
		if strings.HasSuffix(s, x) {
			return true
		}
	}
	return false
}
