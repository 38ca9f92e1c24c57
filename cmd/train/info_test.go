package main

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/internal/testutil"
)

// TestInfoJSONKeysAndValues runs `train info --json` on real files written
// by other tools and checks that each line has exactly the documented keys
// and the values nibabel reported for the same file.
func TestInfoJSONKeysAndValues(t *testing.T) {
	fixtures := filepath.Join("..", "..", "nifti", "testdata")
	raw, err := os.ReadFile(filepath.Join(fixtures, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Files []map[string]any `json:"files"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]any{}
	var args []string
	for _, f := range doc.Files {
		name := f["file"].(string)
		if strings.HasPrefix(name, "real/") || strings.Contains(name, "pair") || strings.Contains(name, "scaled") {
			p := filepath.Join(fixtures, name)
			want[p] = f
			args = append(args, p)
		}
	}
	out, errb, err := runCmd(t, append([]string{"info", "--json"}, args...)...)
	if err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	keys := []string{"affine", "bitpix", "datatype", "dim", "file", "nifti_version", "pixdim", "qfac_stored", "qform", "qform_code",
		"raw_sha256", "scl_inter", "scl_slope", "sform", "sform_code", "shape", "stats", "unit", "vox_offset"}
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		var got map[string]any
		if err := json.Unmarshal(sc.Bytes(), &got); err != nil {
			t.Fatalf("line %d is not JSON: %v", n+1, err)
		}
		n++
		var gotKeys []string
		for k := range got {
			gotKeys = append(gotKeys, k)
		}
		sort.Strings(gotKeys)
		if strings.Join(gotKeys, ",") != strings.Join(keys, ",") {
			t.Fatalf("keys %v, want exactly %v", gotKeys, keys)
		}
		w, ok := want[got["file"].(string)]
		if !ok {
			t.Fatalf("unexpected file %v", got["file"])
		}
		for _, k := range keys {
			if k == "file" || k == "qfac_stored" || k == "unit" { // nibabel has no such key (it reports the qfac applied; get_xyzt_units()); nifti's tests hold it
				continue
			}
			if !approxEqual(got[k], w[k]) {
				t.Errorf("%s: %s = %v, nibabel %v", got["file"], k, got[k], w[k])
			}
		}
	}
	if n != len(args) {
		t.Fatalf("%d JSON lines for %d files", n, len(args))
	}
}

// approxEqual compares decoded JSON values, numbers within 1e-6 relative.
func approxEqual(a, b any) bool {
	switch av := a.(type) {
	case float64:
		bv, ok := b.(float64)
		return ok && math.Abs(av-bv) <= 1e-6*math.Max(1, math.Abs(bv))
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			return false
		}
		for i := range av {
			if !approxEqual(av[i], bv[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok || len(av) != len(bv) {
			return false
		}
		for k := range av {
			if !approxEqual(av[k], bv[k]) {
				return false
			}
		}
		return true
	}
	return a == b
}

func TestInfoReportsBadFileAndContinues(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "broken.nii")
	os.WriteFile(bad, []byte("not a nifti file at all, clearly"), 0o644)
	good := filepath.Join(testutil.DemoDir(t), "imagesTr", "hippocampus_001.nii.gz")
	out, errb, err := runCmd(t, "info", bad, good)
	if err == nil {
		t.Fatal("no error for a broken file")
	}
	if !strings.Contains(errb.String(), "broken.nii") || !strings.Contains(errb.String(), "sizeof_hdr") {
		t.Errorf("stderr %q does not name the file and field", errb.String())
	}
	if !strings.Contains(out.String(), "hippocampus_001") || !strings.Contains(out.String(), "orientation") {
		t.Errorf("the good file was not described: %q", out.String())
	}
}

// TestInfoOnADirectory: a folder given to info is named as a directory,
// not reported as a file with an unknown extension, and the files after
// it are still described.
func TestInfoOnADirectory(t *testing.T) {
	demo := testutil.DemoDir(t)
	for _, dir := range []string{filepath.Join(demo, "imagesTr"), filepath.Join(t.TempDir(), "looks.nii.gz")} {
		os.MkdirAll(dir, 0o755)
		good := filepath.Join(demo, "imagesTr", "hippocampus_001.nii.gz")
		out, errb, err := runCmd(t, "info", dir, good)
		if err == nil || !strings.Contains(err.Error(), "1 of 2") {
			t.Errorf("info %s: %v, want 1 of 2 files failed", dir, err)
		}
		if msg := errb.String(); !strings.Contains(msg, dir+" is a directory") || strings.Contains(msg, "extension") {
			t.Errorf("info %s: stderr %q, want it named as a directory", dir, msg)
		}
		if !strings.Contains(out.String(), "hippocampus_001") {
			t.Errorf("the file after the directory was not described: %q", out.String())
		}
	}
}
