package main

import (
	"strings"
	"testing"
)

// TestMistypedCommandSuggests: a word that is not a command, close to one,
// is answered with that command (cobra does this only for a root without
// Args, which would take any word).
func TestMistypedCommandSuggests(t *testing.T) {
	for typed, want := range map[string]string{"valdiate": "validate", "predcit": "predict", "plott": "plot", "paln": "plan", "exprot": "export"} {
		_, _, err := runCmd(t, typed)
		wantErr(t, err, `unknown command "`+typed+`" for "train"; did you mean "`+want+`"?`)
		wantErr(t, err, "Run 'train --help'")
	}
	_, _, err := runCmd(t, "xyzzy")
	wantErr(t, err, `unknown command "xyzzy"`)
	if err != nil && strings.Contains(err.Error(), "did you mean") {
		t.Errorf("a word far from every command got a suggestion: %v", err)
	}
}

// TestUsageErrorsGiveTheUsageHint: a mistake on the command line (an
// unknown flag, a flag value that does not parse, a missing argument or
// required flag) names the mistake, the command's usage line and its
// --help, and prints no wall of help text.
func TestUsageErrorsGiveTheUsageHint(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		mistake    string
		usage, cmd string
	}{
		{[]string{"validate", "--checkpoint", "ck", "--bogus"}, "unknown flag: --bogus", "train validate --checkpoint C [--fold k | --data D] [flags]", "train validate"},
		{[]string{"--epocs", "3"}, "unknown flag: --epocs", "train --config C [flags] | train COMMAND", "train"},
		{[]string{"bench-step", "--batch", "two"}, `invalid argument "two" for "--batch"`, "train bench-step [--config C] [flags]", "train bench-step"},
		{[]string{"plot"}, "accepts 1 arg(s), received 0", "train plot RUN_DIR [flags]", "train plot"},
		{[]string{"prepare"}, `required flag(s) "config" not set`, "train prepare --config C [flags]", "train prepare"},
		{[]string{"predict", "--checkpoint", "ck"}, "--input (-i) and --output (-o) are required", "train predict (--checkpoint C ... | --model-dir", "train predict"},
	} {
		out, errb, err := runCmd(t, tc.args...)
		if err == nil {
			t.Errorf("%v: no error", tc.args)
			continue
		}
		msg := err.Error()
		for _, w := range []string{tc.mistake, "\nUsage: " + tc.usage, "\nRun '" + tc.cmd + " --help' for the flags and examples."} {
			if !strings.Contains(msg, w) {
				t.Errorf("%v: error %q, want it to contain %q", tc.args, msg, w)
			}
		}
		if strings.Contains(msg, "Flags:") || strings.Contains(out.String()+errb.String(), "Flags:") || strings.Count(msg, "\n") > 3 {
			t.Errorf("%v: the whole help came with the error:\n%s\nstdout:\n%s\nstderr:\n%s", tc.args, msg, out, errb)
		}
	}
}
