package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/internal/testutil"
)

// TestPredictParts: --num-parts N --part-id K predicts every N-th case of
// the folder (name order) from the K-th, as nnU-Net's -num_parts/-part_id;
// the parts together write exactly what one process writes.
func TestPredictParts(t *testing.T) {
	runs := filepath.Join(t.TempDir(), "runs")
	ck := tinyCheckpoint(t, runs, 0, 1, nil)
	demo := testutil.DemoDir(t)
	in := filepath.Join(t.TempDir(), "imagesTs")
	if err := os.Mkdir(in, 0o755); err != nil {
		t.Fatal(err)
	}
	ids := []string{"hippocampus_001", "hippocampus_006", "hippocampus_011"}
	for _, id := range ids {
		if err := os.Symlink(filepath.Join(demo, "imagesTr", id+".nii.gz"), filepath.Join(in, id+"_0000.nii.gz")); err != nil {
			t.Fatal(err)
		}
	}
	out := t.TempDir()
	predict := func(dir string, args ...string) string {
		t.Helper()
		o, errb, err := runCmd(t, append([]string{"predict", "--checkpoint", ck, "-i", in, "-o", dir, "--disable-tta", "--threads", "2"}, args...)...)
		if err != nil {
			t.Fatalf("predict %v: %v\n%s\n%s", args, err, o, errb)
		}
		return o.String()
	}
	whole := filepath.Join(out, "whole")
	parts := filepath.Join(out, "parts")
	predict(whole)
	log0 := predict(parts, "--num-parts", "2", "--part-id", "0")
	names := testutil.DirNames(t, parts)
	if !strings.Contains(log0, "part 0 of 2: 2 of the 3 cases") || !slices.Equal(names, []string{ids[0] + ".nii.gz", ids[2] + ".nii.gz"}) {
		t.Errorf("part 0 of 2 wrote %v:\n%s", names, log0)
	}
	log1 := predict(parts, "--num-parts", "2", "--part-id", "1")
	if !strings.Contains(log1, "part 1 of 2: 1 of the 3 cases") {
		t.Errorf("part 1 of 2:\n%s", log1)
	}
	for _, id := range ids {
		a, err1 := os.ReadFile(filepath.Join(whole, id+".nii.gz"))
		b, err2 := os.ReadFile(filepath.Join(parts, id+".nii.gz"))
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			t.Errorf("%s: the parts' prediction differs from the whole folder's (%v, %v)", id, err1, err2)
		}
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--num-parts", "0"}, "--num-parts 0: want ≥ 1"},
		{[]string{"--num-parts", "2", "--part-id", "2"}, "--part-id 2: want 0 ≤ part-id < --num-parts (2)"},
		{[]string{"--part-id", "-1"}, "--part-id -1"},
		{[]string{"-o", filepath.Join(out, "x.nii.gz"), "--num-parts", "2"}, "--num-parts splits a folder of cases: -o " + filepath.Join(out, "x.nii.gz") + " names one file"},
		{[]string{"-o", filepath.Join(out, "x.ome.zarr"), "--num-parts", "2"}, "one OME-Zarr store"},
	} {
		args := append([]string{"predict", "--checkpoint", ck, "-i", in, "-o", filepath.Join(out, "err")}, c.args...)
		if _, _, err := runCmd(t, args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}
