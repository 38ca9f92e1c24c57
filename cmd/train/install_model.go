package main

import (
	"archive/zip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/voxtrain/voxtrain/checkpoint"
)

// InstallModelOptions are `train install-model`'s.
type InstallModelOptions struct {
	IO *IOStreams
	// Zip is the file train export-model wrote; Output the folder of
	// training outputs the model's folder is created in.
	Zip, Output string
}

// NewCmdInstallModel builds `train install-model`; runF (nil:
// installModelRun) receives the options.
func NewCmdInstallModel(f *Factory, runF func(context.Context, *InstallModelOptions) error) *cobra.Command {
	opts := &InstallModelOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "install-model MODEL.zip -o OUTPUT_DIR",
		Short: "Unpack a model train export-model packed, for predict --model-dir (nnUNetv2_install_pretrained_model_from_zip)",
		Long: `install-model unpacks a zip train export-model wrote into OUTPUT_DIR/EXP,
as nnUNetv2_install_pretrained_model_from_zip does: train predict
--model-dir OUTPUT_DIR/EXP then predicts with its folds. Every entry is
checked before anything is written: names inside the zip's one experiment
folder (no absolute paths, no .., no links), at least one checkpoint; an
existing OUTPUT_DIR/EXP is never written over. The files are unpacked
beside it and moved into place at the end, so a failure (a damaged zip:
its checksums are verified) leaves nothing half-installed.`,
		Example: `  train install-model /data/hippocampus.zip -o /data/runs`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Zip = args[0]
			if opts.Output == "" {
				return usageErr(cmd, errors.New("--output (-o) is required: the folder the model's experiment folder goes in"))
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return installModelRun(opts)
		},
	}
	cmd.Flags().StringVarP(&opts.Output, "output", "o", "", "folder of training outputs to install the model's experiment folder in (e.g. runs)")
	return cmd
}

func installModelRun(opts *InstallModelOptions) error {
	zr, err := zip.OpenReader(opts.Zip)
	if err != nil {
		return fmt.Errorf("%s: %w", opts.Zip, err)
	}
	defer zr.Close()
	exp, err := checkModelZip(opts.Zip, zr.File)
	if err != nil {
		return err
	}
	dst := filepath.Join(opts.Output, exp)
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("%s: %s exists: install into another --output, or move it away first (nothing is written over)", opts.Zip, dst)
	}
	if err := os.MkdirAll(opts.Output, 0o755); err != nil {
		return fmt.Errorf("--output %s: %w", opts.Output, err)
	}
	tmp, err := os.MkdirTemp(opts.Output, ".install-"+exp+"-*")
	if err != nil {
		return fmt.Errorf("--output %s: %w", opts.Output, err)
	}
	defer os.RemoveAll(tmp) // after the rename: nothing
	var size int64
	for _, f := range zr.File {
		if strings.HasSuffix(f.Name, "/") {
			continue
		}
		n, err := unpack(f, filepath.Join(tmp, filepath.FromSlash(f.Name)))
		if err != nil {
			return fmt.Errorf("%s: %s: %w", opts.Zip, f.Name, err)
		}
		size += n
	}
	if err := os.Rename(filepath.Join(tmp, exp), dst); err != nil {
		return fmt.Errorf("install %s: %w", dst, err)
	}
	folds, _ := modelFolds(dst, func(int) bool { return true })
	fmt.Fprintf(opts.IO.Out, "installed %s: folds %s, %d files, %.1f MiB\n", dst, foldsText(folds), len(zr.File), float64(size)/(1<<20))
	fmt.Fprintf(opts.IO.Out, "predict with it: train predict --model-dir %s -i INPUT_FOLDER -o OUTPUT_FOLDER\n", shellQuote(dst))
	return nil
}

// checkModelZip checks every entry of a model zip before anything is
// unpacked and returns its experiment folder's name: each entry a plain
// file or folder (no link, no device) under one top folder, its name
// relative and clean (no .., no absolute path, no backslash), and some
// fold's checkpoint pointer and manifest among them.
func checkModelZip(zipPath string, files []*zip.File) (string, error) {
	exp := ""
	var pointers, manifests int
	for _, f := range files {
		name := f.Name
		bad := name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, `\`) || strings.Contains(name, ":") ||
			path.Clean(name) != strings.TrimSuffix(name, "/") || strings.HasPrefix(path.Clean(name), "..")
		for _, part := range strings.Split(strings.TrimSuffix(name, "/"), "/") {
			bad = bad || part == ".." || part == "." || part == ""
		}
		if bad {
			return "", fmt.Errorf("%s: entry %q: not a plain relative name inside the model's folder (refused: it could write outside)", zipPath, name)
		}
		if m := f.Mode(); !m.IsRegular() && !m.IsDir() {
			return "", fmt.Errorf("%s: entry %q is a %v, not a file (refused)", zipPath, name, m.Type())
		}
		top, rest, _ := strings.Cut(name, "/")
		switch {
		case exp == "":
			exp = top
		case top != exp:
			return "", fmt.Errorf("%s: entries under %s/ and %s/: a model zip holds one experiment folder", zipPath, exp, top)
		}
		if strings.HasPrefix(top, ".") {
			return "", fmt.Errorf("%s: the experiment folder %q is hidden: not a model zip", zipPath, top)
		}
		parts := strings.Split(rest, "/")
		_, isFold := checkpoint.ParseFoldDir(parts[0])
		if len(parts) == 4 && isFold && parts[2] == "checkpoints" && (parts[3] == "last" || parts[3] == "best") {
			pointers++
		}
		if len(parts) == 5 && parts[2] == "checkpoints" && parts[4] == "manifest.json" {
			manifests++
		}
	}
	if pointers == 0 || manifests == 0 {
		return "", fmt.Errorf("%s: no fold_<k>/run_<r>/checkpoints/last or best with its checkpoint: not a model train export-model wrote", zipPath)
	}
	return exp, nil
}

// unpack writes one entry to dst (its folders made), checking its
// checksum and size as it reads (archive/zip); it returns the bytes
// written.
func unpack(f *zip.File, dst string) (int64, error) {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return 0, err
	}
	r, err := f.Open()
	if err != nil {
		return 0, err
	}
	defer r.Close()
	w, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(w, r)
	if err != nil {
		w.Close()
		return n, err
	}
	return n, w.Close()
}
