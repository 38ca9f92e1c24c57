package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/internal/testutil"
)

func TestPlanFlags(t *testing.T) {
	o, err := capture(t, NewCmdPlan, "../../testdata/demo", "-o", "out", "--workers", "3", "--gpu-memory", "24")
	if err != nil {
		t.Fatal(err)
	}
	if o.Dataset != "../../testdata/demo" || o.Output != "out" || o.Workers != 3 || o.VRAMGB != 24 {
		t.Errorf("options %+v", o)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"../../testdata/demo"}, "-o/--output is required"},
		{[]string{"-o", "out"}, "accepts 1 arg"},
		{[]string{"../../testdata/demo", "-o", "out", "--workers", "0"}, "--workers: 0"},
		{[]string{"../../testdata/demo", "-o", "out", "--gpu-memory", "0"}, "--gpu-memory: 0"},
		{[]string{"../../testdata/demo", "-o", "../../testdata/demo/plans"}, "inside the dataset folder"},
		{[]string{"../../testdata/demo", "-o", "../../testdata/demo"}, "inside the dataset folder"},
	} {
		if _, err := capture(t, NewCmdPlan, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
	// A sibling whose name starts with the dataset's is not inside it.
	if inside("../../testdata/demo2", "../../testdata/demo") {
		t.Error("demo2 counted as inside demo")
	}
}

// TestPlanRunDemo plans the demo in process and trains nothing: the files
// are there and every YAML loads.
func TestPlanRunDemo(t *testing.T) {
	if testutil.Race {
		t.Skip("the 80 demo cases are slow under the race detector (package plan tests the concurrency)")
	}
	f, out, _ := testFactory()
	dir := filepath.Join(t.TempDir(), "plans")
	cmd := NewCmdPlan(f, nil)
	cmd.SetArgs([]string{"../../testdata/demo", "-o", dir, "--workers", "2"})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"dataset_fingerprint.json", "plans.json", "3d_fullres.yaml", "2d.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "3d_lowres.yaml")); !os.IsNotExist(err) {
		t.Errorf("3d_lowres.yaml for the small demo images: %v (nnU-Net drops it)", err)
	}
	for _, name := range []string{"3d_fullres.yaml", "2d.yaml"} {
		if _, err := config.Load(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
	if !strings.Contains(out.String(), "3d_fullres patch [40 56 40]") {
		t.Errorf("output %q, want the 3d_fullres summary", out.String())
	}
}
