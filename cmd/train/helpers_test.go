package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/cobra"
	"github.com/voxtrain/voxtrain/gpumon"
	"github.com/voxtrain/voxtrain/internal/testutil"
)

// testFactory is a Factory for in-process runs: output into buffers, the
// CPU device only (a CUDA --device fails as in a build without CUDA), no
// GPU monitor.
func testFactory() (*Factory, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	f := &Factory{IO: &IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errb}, Version: "test",
		Args:    []string{"train"},
		Monitor: func(string) *gpumon.Monitor { return nil },
		OpenDevice: func(spec string, threads int) (*ComputeDevice, error) {
			d, err := parseDeviceSpec(spec)
			if err == nil && d.kind != "cpu" {
				return nil, errors.New("test factory: no CUDA device")
			}
			return openComputeDevice(spec, threads)
		},
	}
	return f, &out, &errb
}

// runCmd runs the whole command tree in process with args.
func runCmd(t *testing.T, args ...string) (out, errb *bytes.Buffer, err error) {
	t.Helper()
	f, out, errb := testFactory()
	f.Args = append([]string{"train"}, args...)
	cmd := NewCmdRoot(f)
	cmd.SetArgs(nonNil(args))
	return out, errb, cmd.ExecuteContext(context.Background())
}

// writeConfig writes a run config naming the bundled demo data and returns
// its path.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "run.yaml")
	doc := "data:\n  dataset: " + testutil.DemoDir(t) + "\n" + body
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// capture runs the command newCmd builds with args, with a runF that keeps
// the options instead of running; it returns them (nil when RunE failed
// first) and the error.
func capture[O any](t *testing.T, newCmd func(*Factory, func(context.Context, *O) error) *cobra.Command, args ...string) (*O, error) {
	t.Helper()
	f, _, _ := testFactory()
	f.Args = append([]string{"train"}, args...)
	var got *O
	cmd := newCmd(f, func(_ context.Context, o *O) error { got = o; return nil })
	cmd.SetArgs(nonNil(args))
	cmd.SetOut(f.IO.Out)
	cmd.SetErr(f.IO.ErrOut)
	err := cmd.ExecuteContext(context.Background())
	return got, err
}

// nonNil is args, never nil: cobra reads the process's own arguments
// (the test binary's -test.* flags) in place of nil ones.
func nonNil(args []string) []string {
	if args == nil {
		return []string{}
	}
	return args
}
