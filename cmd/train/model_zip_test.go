package main

import (
	"archive/zip"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestExportInstallModel: export-model packs a training output folder's
// folds (the checkpoint behind last as a directory and a pointer, the
// run's config, the final validation's summary); install-model unpacks it
// elsewhere, and predict --model-dir on the installed folder writes the
// same bytes as on the original.
func TestExportInstallModel(t *testing.T) {
	runs := filepath.Join(t.TempDir(), "runs")
	tinyCheckpoint(t, runs, 0, 1, nil)
	tinyCheckpoint(t, runs, 1, 2, nil)
	for _, k := range []string{"0", "1"} {
		run := filepath.Join(runs, "tiny", "fold_"+k, "run_0")
		cfg, err := os.ReadFile(filepath.Join(run, "checkpoints", "last", "config.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for name, b := range map[string][]byte{"config.yaml": cfg, "validation/summary.json": []byte("{}\n"), "validation/x.nii.gz": []byte("x")} {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(run, name)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(run, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	dir := t.TempDir()
	zipPath := filepath.Join(dir, "tiny.zip")
	out, errb, err := runCmd(t, "export-model", "--model-dir", filepath.Join(runs, "tiny"), "-o", zipPath)
	if err != nil {
		t.Fatalf("export-model: %v\n%s\n%s", err, out, errb)
	}
	if !strings.Contains(out.String(), "wrote "+zipPath+": tiny, folds 0 1 (run 0, checkpoint last)") {
		t.Errorf("export-model's output:\n%s", out)
	}
	zr, err := zip.OpenReader(zipPath)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	zr.Close()
	for _, want := range []string{"tiny/fold_0/run_0/config.yaml", "tiny/fold_0/run_0/checkpoints/last", "tiny/fold_1/run_0/validation/summary.json"} {
		if !slices.Contains(names, want) {
			t.Errorf("the zip lacks %s: %v", want, names)
		}
	}
	if slices.Contains(names, "tiny/fold_0/run_0/validation/x.nii.gz") {
		t.Errorf("the zip holds a validation prediction without --with-validation: %v", names)
	}

	installed := filepath.Join(dir, "elsewhere")
	out, errb, err = runCmd(t, "install-model", zipPath, "-o", installed)
	if err != nil {
		t.Fatalf("install-model: %v\n%s\n%s", err, out, errb)
	}
	if !strings.Contains(out.String(), "installed "+filepath.Join(installed, "tiny")+": folds 0 1") {
		t.Errorf("install-model's output:\n%s", out)
	}
	in := nnunetInputs(t)
	predict := func(model, o string) {
		t.Helper()
		if out, errb, err := runCmd(t, "predict", "--model-dir", model, "-i", in, "-o", o, "--disable-tta", "--threads", "2"); err != nil {
			t.Fatalf("predict --model-dir %s: %v\n%s\n%s", model, err, out, errb)
		}
	}
	predict(filepath.Join(runs, "tiny"), filepath.Join(dir, "p_orig"))
	predict(filepath.Join(installed, "tiny"), filepath.Join(dir, "p_inst"))
	for _, id := range []string{"hippocampus_001", "hippocampus_006"} {
		a, err1 := os.ReadFile(filepath.Join(dir, "p_orig", id+".nii.gz"))
		b, err2 := os.ReadFile(filepath.Join(dir, "p_inst", id+".nii.gz"))
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			t.Errorf("%s: the installed model predicts otherwise (%v, %v)", id, err1, err2)
		}
	}
	// Installing again would write over it: refused, nothing touched.
	if _, _, err := runCmd(t, "install-model", zipPath, "-o", installed); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("a second install: %v", err)
	}
	// --fold 1 with --with-validation.
	one := filepath.Join(dir, "one.zip")
	if out, errb, err := runCmd(t, "export-model", "--model-dir", filepath.Join(runs, "tiny"), "--fold", "1", "--with-validation", "-o", one); err != nil {
		t.Fatalf("export-model --fold 1: %v\n%s\n%s", err, out, errb)
	}
	zr, err = zip.OpenReader(one)
	if err != nil {
		t.Fatal(err)
	}
	names = names[:0]
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	zr.Close()
	if !slices.Contains(names, "tiny/fold_1/run_0/validation/x.nii.gz") || slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "tiny/fold_0/") }) {
		t.Errorf("export-model --fold 1 --with-validation packed %v", names)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--model-dir", filepath.Join(runs, "nope"), "-o", one}, "not a folder"},
		{[]string{"--model-dir", filepath.Join(runs, "tiny"), "--checkpoint-name", "best", "-o", one}, "no fold_<k>/run_0/checkpoints/best"},
		{[]string{"--model-dir", filepath.Join(runs, "tiny"), "--checkpoint-name", "final", "-o", one}, `--checkpoint-name "final"`},
		{[]string{"--model-dir", filepath.Join(runs, "tiny"), "-o", filepath.Join(dir, "m.tar")}, "want a .zip file name"},
		{[]string{"--model-dir", filepath.Join(runs, "tiny"), "--fold", "3", "-o", one}, "--fold 3: no "},
	} {
		if _, _, err := runCmd(t, append([]string{"export-model"}, c.args...)...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("export-model %v: %v, want %q", c.args, err, c.want)
		}
	}
}

// TestInstallModelRefusesBadZips: entries that would write outside the
// model's folder, links, a second top folder, no checkpoint, a damaged
// zip: refused before (or, for a bad checksum, without leaving) anything
// in the output.
func TestInstallModelRefusesBadZips(t *testing.T) {
	dir := t.TempDir()
	good := []string{"exp/fold_0/run_0/checkpoints/last", "exp/fold_0/run_0/checkpoints/ckpt-e0001-s000000001/manifest.json"}
	write := func(name string, entries []string, link string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		var b bytes.Buffer
		zw := zip.NewWriter(&b)
		for _, e := range entries {
			w, err := zw.CreateHeader(&zip.FileHeader{Name: e, Method: zip.Store})
			if err != nil {
				t.Fatal(err)
			}
			w.Write([]byte("ckpt-e0001-s000000001\n"))
		}
		if link != "" {
			h := &zip.FileHeader{Name: link}
			h.SetMode(os.ModeSymlink | 0o777)
			w, err := zw.CreateHeader(h)
			if err != nil {
				t.Fatal(err)
			}
			w.Write([]byte("/etc/passwd"))
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	out := filepath.Join(dir, "out")
	for _, c := range []struct {
		name    string
		entries []string
		link    string
		want    string
	}{
		{"dotdot.zip", append(good, "exp/../../evil"), "", `entry "exp/../../evil": not a plain relative name`},
		{"abs.zip", append(good, "/tmp/evil"), "", `entry "/tmp/evil"`},
		{"backslash.zip", append(good, `exp\..\evil`), "", "not a plain relative name"},
		{"link.zip", good, "exp/fold_0/run_0/evil", "is a L"},
		{"two.zip", append(good, "other/x"), "", "entries under exp/ and other/"},
		{"nockpt.zip", []string{"exp/fold_0/run_0/config.yaml"}, "", "no fold_<k>/run_<r>/checkpoints/last or best"},
	} {
		p := write(c.name, c.entries, c.link)
		if _, _, err := runCmd(t, "install-model", p, "-o", out); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a refused zip created %s", out)
	}
	// A damaged entry (its bytes changed after packing): the checksum
	// fails, and nothing is left in the output.
	p := write("crc.zip", good, "")
	b, _ := os.ReadFile(p)
	i := bytes.Index(b, []byte("ckpt-e0001-s000000001\n")) // the first entry's stored bytes
	b[i] = 'X'
	os.WriteFile(p, b, 0o644)
	if _, _, err := runCmd(t, "install-model", p, "-o", out); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("damaged zip: %v", err)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Errorf("a damaged zip left %v in the output", ents)
	}
	if _, _, err := runCmd(t, "install-model", filepath.Join(dir, "missing.zip"), "-o", out); err == nil || !strings.Contains(err.Error(), "missing.zip") {
		t.Errorf("missing zip: %v", err)
	}
}
