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
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/voxtrain/voxtrain/checkpoint"
	"github.com/voxtrain/voxtrain/internal/atomicfile"
)

// ExportModelOptions are `train export-model`'s.
type ExportModelOptions struct {
	IO *IOStreams
	// ModelDir is the training output folder (<output_dir>/<experiment>);
	// Folds (nil: every fold_<k> and fold_all that has the checkpoints),
	// RunID and Checkpoints (names: last, best) pick what goes in.
	ModelDir    string
	Folds       []int
	RunID       int
	Checkpoints []string
	// WithValidation adds each fold's final validation folder whole (its
	// predictions and CASE.npz; its summary.json always goes in).
	WithValidation bool
	// Output is the zip file written.
	Output string
}

// NewCmdExportModel builds `train export-model`; runF (nil: exportModelRun)
// receives the options.
func NewCmdExportModel(f *Factory, runF func(context.Context, *ExportModelOptions) error) *cobra.Command {
	opts := &ExportModelOptions{IO: f.IO}
	var folds []string
	cmd := &cobra.Command{
		Use:   "export-model --model-dir runs/EXP -o model.zip [--fold K ...]",
		Short: "Pack a trained model's folds into a zip to share (nnUNetv2_export_model_to_zip)",
		Long: `export-model packs what predicting with a training output folder needs
into one zip, as nnUNetv2_export_model_to_zip does: for each fold (every
fold_<k> and fold_all with the checkpoint, or --fold), the run's
config.yaml, the checkpoint (--checkpoint-name last, or best, or both: the
checkpoint directory and its last/best pointer), its metrics.jsonl, plots
and final validation's summary.json (--with-validation: the whole
validation folder, predictions and CASE.npz), and the experiment's
splits_final.json. train install-model unpacks it on another machine,
where train predict --model-dir uses it as the original.`,
		Example: `  train export-model --model-dir /data/runs/demo -o /data/demo_model.zip
  train export-model --model-dir /data/runs/Dataset004_Hippocampus_3d_fullres --fold 0,1,2,3,4 --checkpoint-name last,best -o /data/hippocampus.zip`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.ModelDir == "" || opts.Output == "" {
				return usageErr(cmd, errors.New("--model-dir and --output (-o) are required"))
			}
			var err error
			if opts.Folds, err = parseFolds(folds); err != nil {
				return err
			}
			if opts.RunID < 0 {
				return fmt.Errorf("--run-id %d: want ≥ 0", opts.RunID)
			}
			if len(opts.Checkpoints) == 0 {
				return errors.New("--checkpoint-name: give last, best or last,best")
			}
			for _, c := range opts.Checkpoints {
				if c != "last" && c != "best" {
					return fmt.Errorf("--checkpoint-name %q: want last, best or last,best", c)
				}
			}
			if !strings.HasSuffix(strings.ToLower(opts.Output), ".zip") {
				return fmt.Errorf("--output %s: want a .zip file name", opts.Output)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return exportModelRun(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.ModelDir, "model-dir", "", "training output folder of one experiment (runs/EXP, holding fold_<k>/run_<r>/)")
	fl.StringSliceVarP(&folds, "fold", "f", nil, "folds to pack: 0 1 2, 0,1,2 or all (fold_all); default every fold with the checkpoint")
	fl.IntVar(&opts.RunID, "run-id", 0, "run of each fold (run_<id>)")
	fl.StringSliceVar(&opts.Checkpoints, "checkpoint-name", []string{"last"}, "checkpoints of each fold: last (as nnU-Net's checkpoint_final), best, or last,best")
	fl.BoolVar(&opts.WithValidation, "with-validation", false, "also pack each fold's final validation predictions (and CASE.npz), not only its summary.json")
	fl.StringVarP(&opts.Output, "output", "o", "", "the zip file to write")
	return cmd
}

// exportModelRun lists what goes in, then writes the zip beside its
// final name and renames it there: a failure leaves no partial zip.
func exportModelRun(opts *ExportModelOptions) error {
	files, folds, err := opts.modelFiles()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(opts.Output), 0o755); err != nil {
		return fmt.Errorf("--output %s: %w", opts.Output, err)
	}
	f, err := atomicfile.CreateUmask(opts.Output, 0o666)
	if err != nil {
		return fmt.Errorf("--output %s: %w", opts.Output, err)
	}
	defer f.Close() // after Commit: nothing
	zw := zip.NewWriter(f)
	var size int64
	for _, e := range files {
		n, err := addZipFile(zw, e)
		if err != nil {
			return err
		}
		size += n
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("write %s: %w", opts.Output, err)
	}
	if err := f.Commit(); err != nil {
		return fmt.Errorf("write %s: %w", opts.Output, err)
	}
	fmt.Fprintf(opts.IO.Out, "wrote %s: %s, folds %s (run %d, checkpoint %s), %d files, %.1f MiB\n", opts.Output,
		filepath.Base(filepath.Clean(opts.ModelDir)), foldsText(folds), opts.RunID, strings.Join(opts.Checkpoints, "+"), len(files), float64(size)/(1<<20))
	fmt.Fprintf(opts.IO.Out, "install it with: train install-model %s -o OUTPUT_DIR\n", opts.Output)
	return nil
}

// zipEntry is a file to pack: its name in the zip (slash-separated,
// under the experiment's folder) and where it is, or its contents (a
// pointer file the export makes).
type zipEntry struct {
	name, path string
	data       []byte
}

// modelFiles lists the files to pack and the folds they come from.
func (o *ExportModelOptions) modelFiles() ([]zipEntry, []int, error) {
	if fi, err := os.Stat(o.ModelDir); err != nil || !fi.IsDir() {
		return nil, nil, fmt.Errorf("--model-dir %s: not a folder (want a training output folder, <output_dir>/<experiment>)", o.ModelDir)
	}
	exp := filepath.Base(filepath.Clean(o.ModelDir))
	if abs, err := filepath.Abs(o.ModelDir); err == nil {
		exp = filepath.Base(abs)
	}
	hasAll := func(k int) bool {
		for _, c := range o.Checkpoints {
			if _, err := os.Stat(filepath.Join(foldRunDir(o.ModelDir, k, o.RunID), "checkpoints", c)); err != nil {
				return false
			}
		}
		return true
	}
	folds := o.Folds
	if folds == nil {
		var err error
		if folds, err = modelFolds(o.ModelDir, hasAll); err != nil {
			return nil, nil, fmt.Errorf("--model-dir %w", err)
		}
		if hasAll(-1) {
			folds = append(folds, -1)
		}
		if len(folds) == 0 {
			return nil, nil, fmt.Errorf("--model-dir %s: no fold_<k>/run_%d/checkpoints/%s (give --fold, --run-id or --checkpoint-name)",
				o.ModelDir, o.RunID, strings.Join(o.Checkpoints, ", "))
		}
	}
	var files []zipEntry
	add := func(rel, src string) {
		files = append(files, zipEntry{name: exp + "/" + filepath.ToSlash(rel), path: src})
	}
	if p := filepath.Join(o.ModelDir, "splits_final.json"); isFile(p) {
		add("splits_final.json", p)
	}
	for _, k := range folds {
		run := foldRunDir(o.ModelDir, k, o.RunID)
		rel, err := filepath.Rel(o.ModelDir, run)
		if err != nil {
			return nil, nil, err
		}
		cfg := filepath.Join(run, "config.yaml")
		if !isFile(cfg) {
			return nil, nil, fmt.Errorf("--model-dir %s --fold %s: no %s (the run's config)", o.ModelDir, foldName(k), cfg)
		}
		add(path.Join(rel, "config.yaml"), cfg)
		if p := filepath.Join(run, "metrics.jsonl"); isFile(p) {
			add(path.Join(rel, "metrics.jsonl"), p)
		}
		if pngs, _ := filepath.Glob(filepath.Join(run, "plots", "*.png")); len(pngs) > 0 {
			for _, p := range pngs {
				add(path.Join(rel, "plots", filepath.Base(p)), p)
			}
		}
		if o.WithValidation {
			val := filepath.Join(run, "validation")
			ents, err := os.ReadDir(val)
			if err != nil {
				return nil, nil, fmt.Errorf("--with-validation: fold %s: %w", foldName(k), err)
			}
			for _, e := range ents {
				if e.Type().IsRegular() {
					add(path.Join(rel, "validation", e.Name()), filepath.Join(val, e.Name()))
				}
			}
		} else if p := filepath.Join(run, "validation", "summary.json"); isFile(p) {
			add(path.Join(rel, "validation", "summary.json"), p)
		}
		packed := map[string]bool{}
		for _, c := range o.Checkpoints {
			ptr := filepath.Join(run, "checkpoints", c)
			dir, err := checkpoint.Dir(ptr) // a link, or a pointer file
			if err != nil || !isFile(filepath.Join(dir, "manifest.json")) {
				return nil, nil, fmt.Errorf("--model-dir %s --fold %s: %s is not a checkpoint (%v)", o.ModelDir, foldName(k), ptr, err)
			}
			name := filepath.Base(dir)
			// The pointer is packed as a pointer file holding the
			// checkpoint's name, which checkpoint.Load follows as it
			// follows the link: a zip holds no links.
			files = append(files, zipEntry{name: exp + "/" + path.Join(rel, "checkpoints", c), data: []byte(name + "\n")})
			if packed[name] {
				continue
			}
			packed[name] = true
			ents, err := os.ReadDir(dir)
			if err != nil {
				return nil, nil, err
			}
			for _, e := range ents {
				if e.Type().IsRegular() {
					add(path.Join(rel, "checkpoints", name, e.Name()), filepath.Join(dir, e.Name()))
				}
			}
		}
	}
	return files, folds, nil
}

// addZipFile packs e: deflated, but for weights and probabilities (float
// arrays deflate gains little on), which are stored. It returns the bytes
// packed.
func addZipFile(zw *zip.Writer, e zipEntry) (int64, error) {
	if e.data != nil {
		w, err := zw.Create(e.name)
		if err != nil {
			return 0, err
		}
		n, err := w.Write(e.data)
		return int64(n), err
	}
	name, path := e.name, e.path
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	h := &zip.FileHeader{Name: name, Method: zip.Deflate, Modified: fi.ModTime()}
	h.SetMode(0o644)
	if slices.Contains([]string{".safetensors", ".npz"}, filepath.Ext(path)) {
		h.Method = zip.Store
	}
	w, err := zw.CreateHeader(h)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(w, f)
	if err != nil {
		return n, fmt.Errorf("pack %s: %w", path, err)
	}
	return n, nil
}

// foldsText writes folds as "0 1 all".
func foldsText(folds []int) string {
	s := make([]string, len(folds))
	for i, k := range folds {
		s[i] = foldName(k)
	}
	return strings.Join(s, " ")
}

func isFile(p string) bool { fi, err := os.Stat(p); return err == nil && fi.Mode().IsRegular() }
