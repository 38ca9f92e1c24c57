package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// shWords has sh parse words after `set --` and returns them as sh sees
// them. It runs in an empty directory: words quoted wrongly would run
// commands (id) and redirect into files.
func shWords(t *testing.T, words string) []string {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	cmd := exec.Command(sh, "-c", "set -- "+words+"\nprintf '%s\\0' \"$@\"")
	cmd.Env = []string{"HOME=/home/expanded", "PATH=/usr/bin:/bin"}
	cmd.Dir = t.TempDir()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("sh -c %q: %v\n%s", words, err, errb.String())
	}
	return strings.Split(strings.TrimSuffix(out.String(), "\x00"), "\x00")
}

// nastyArgs are words a shell would otherwise expand, split, glob or
// end early.
var nastyArgs = []string{
	"plain", "", "a b", "it's", "''", "'", `"double"`, "$HOME", "${HOME}x", "`id`", "$(id)", `back\slash`,
	`\'`, "tab\there", "new\nline", "*", "?", "[ab]", "~", "~root/x", "a;b", "a|b", "a&b", "a>b", "#hash", "!bang",
	"{a,b}", "--x=~/y", "runs/my run (2)/it's $5 \\ \"ok\"", "é ü ∂", "-", "--",
}

// TestShellQuote: each quoted word comes out of sh as the word itself,
// and the quoting is the single-quote style the README shows.
func TestShellQuote(t *testing.T) {
	var quoted []string
	for _, a := range nastyArgs {
		quoted = append(quoted, shellQuote(a))
	}
	if got := shWords(t, strings.Join(quoted, " ")); !slices.Equal(got, nastyArgs) {
		t.Errorf("sh read the quoted words as\n%q\nwant\n%q\n(quoted: %s)", got, nastyArgs, strings.Join(quoted, " "))
	}
	for in, want := range map[string]string{
		"it's": `'it'\''s'`, "": "''", "a b": "'a b'", "$HOME": "'$HOME'", "runs/x_1.yaml": "runs/x_1.yaml",
		"cuda:1,bf16": "cuda:1,bf16", "--epochs=9": "--epochs=9",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestResumeCommandPastesIntoSh: the printed resume command, pasted into
// sh, runs the program with the original args (the program's path
// quoted too), --resume replaced by --resume auto.
func TestResumeCommandPastesIntoSh(t *testing.T) {
	args := []string{"/opt/my tools/it's/train", "--config", "runs/it's $HOME/a b.yaml", "--resume", "ckpt dir",
		"--output-dir", `C:\runs "x"`, "--resume=old", "--epochs=9"}
	want := []string{args[0], "--config", args[2], "--output-dir", args[6], "--epochs=9", "--resume", "auto"}
	cmd := resumeCommand(args)
	if got := shWords(t, cmd); !slices.Equal(got, want) {
		t.Errorf("sh read the resume command %s as\n%q\nwant\n%q", cmd, got, want)
	}
	if got := resumeCommand([]string{"a=b", "--fold", "1"}); got != "'a=b' --fold 1 --resume auto" {
		t.Errorf("a program named like an assignment: %s", got)
	}
	for _, nasty := range nastyArgs {
		got := shWords(t, resumeCommand([]string{"train", "--output-dir", nasty}))
		if w := []string{"train", "--output-dir", nasty, "--resume", "auto"}; !slices.Equal(got, w) {
			t.Errorf("--output-dir %q: sh read %q", nasty, got)
		}
	}
}

// TestRunConfigTrainsAgain: a run's own config.yaml (the resolved config,
// every setting written out) is a config train takes: resuming the run
// from it trains on. Before, a deep-supervised model's unset
// loss.deep_supervision_weights came back from it as an empty list, which
// the loss refused ("0 weights for 2 outputs").
func TestRunConfigTrainsAgain(t *testing.T) {
	dir := t.TempDir()
	cfg := initConfig(t, dir, 3, "", "")
	runs := filepath.Join(dir, "runs")
	if o, errb, err := runCmd(t, "--config", cfg, "--output-dir", runs, "--threads", "2"); err != nil {
		t.Fatalf("train: %v\n%s\n%s", err, o, errb)
	}
	runCfg := filepath.Join(runs, "ft", "fold_0", "run_0", "config.yaml")
	o, errb, err := runCmd(t, "--config", runCfg, "--resume", "auto", "--epochs", "2", "--threads", "2")
	if err != nil || !strings.Contains(o.String(), "2 epochs, 2 steps") {
		t.Fatalf("train --config %s --resume auto --epochs 2: %v\n%s\n%s", runCfg, err, o, errb)
	}
}
