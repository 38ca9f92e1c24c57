package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/evaluation"
	"github.com/voxtrain/voxtrain/internal/samepath"
	"github.com/voxtrain/voxtrain/volume"
)

// gatherCrossval is nnU-Net's accumulate_cv_results for a --cv whose
// folder is a training output folder (c.ModelDir): the final validation of
// each fold (fold_<k>/run_<runID>/validation/, validation.final's or
// train validate --output's) is gathered into dst — its label files (with
// their companion files) and CASE.npz, linked where the file system
// allows, else copied — which then holds the configuration's pooled
// cross-validation predictions, as a folder given to --cv does. folds nil
// means every fold of the runs' data.num_folds, as nnU-Net's default
// (0, 1, 2, 3, 4); a fold without a final validation is an error naming
// it, not a smaller cross-validation. Files an earlier gathering left in
// dst are removed first. It fills c's Dir, Folds and CheckpointName (the
// checkpoint the folds validated, for the inference instructions).
func gatherCrossval(c *cvConfig, folds []int, runID int, ending, dst string, log io.Writer) error {
	where := fmt.Sprintf("--cv %s=%s", c.Name, c.ModelDir)
	if folds == nil {
		trained, err := modelFolds(c.ModelDir, func(k int) bool {
			fi, err := os.Stat(foldRunDir(c.ModelDir, k, runID))
			return err == nil && fi.IsDir()
		})
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if len(trained) == 0 {
			return fmt.Errorf("%s: no fold_<k>/run_%d (give --run-id)", where, runID)
		}
		cfg, err := config.Load(filepath.Join(foldRunDir(c.ModelDir, trained[0], runID), "config.yaml"))
		if err != nil {
			return fmt.Errorf("%s: the number of folds: %w (give --folds)", where, err)
		}
		for k := 0; k < cfg.Data.NumFolds; k++ {
			folds = append(folds, k)
		}
	}
	for _, k := range folds {
		if val := filepath.Join(foldRunDir(c.ModelDir, k, runID), "validation"); samepath.Same(dst, val) {
			return fmt.Errorf("%s: the folds would be gathered into fold %d's own validation %s: give another --output", where, k, val)
		}
	}
	if err := clearCrossval(dst); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	byCase := map[string]int{} // label file → the fold that validated it
	finals := map[string][]int{}
	for _, k := range folds {
		run := foldRunDir(c.ModelDir, k, runID)
		val := filepath.Join(run, "validation")
		if _, err := os.Stat(filepath.Join(val, "summary.json")); err != nil {
			return fmt.Errorf("%s: fold %d has no final validation (%s/summary.json): train the fold to its end with validation.final: last, or train validate --checkpoint %s --output %s; or leave the fold out with --folds",
				where, k, val, filepath.Join(run, "checkpoints", "last"), val)
		}
		names, err := evaluation.LabelNames(val, ending)
		if err != nil {
			return fmt.Errorf("%s: fold %d: %w", where, k, err)
		}
		for _, n := range names {
			if other, dup := byCase[n]; dup {
				return fmt.Errorf("%s: folds %d and %d both have a prediction %s: their validation cases overlap (runs of different splits?)", where, other, k, n)
			}
			byCase[n] = k
			files := volume.WrittenFiles(filepath.Join(val, n))
			npz := labelStem(filepath.Join(val, n)) + ".npz"
			if _, err := os.Stat(npz); err == nil {
				files = append(files, npz)
			}
			for _, f := range files {
				if err := linkOrCopy(f, filepath.Join(dst, filepath.Base(f))); err != nil {
					return fmt.Errorf("%s: fold %d: %w", where, k, err)
				}
			}
		}
		if cfg, err := config.Load(filepath.Join(run, "config.yaml")); err == nil {
			finals[cfg.Validation.Final] = append(finals[cfg.Validation.Final], k)
		}
	}
	if len(finals[config.FinalBest]) > 0 && len(finals[config.FinalLast]) > 0 {
		return fmt.Errorf("%s: folds %v validated their best checkpoint, folds %v their last: no one checkpoint name predicts as the cross-validation did",
			where, finals[config.FinalBest], finals[config.FinalLast])
	}
	if len(finals[config.FinalBest]) > 0 {
		c.CheckpointName = config.FinalBest
	}
	c.Dir, c.Folds = dst, folds
	fmt.Fprintf(log, "%s: the final validations of folds %s (run %d) of %s: %d cases, gathered in %s\n",
		c.Name, intsText(folds, " "), runID, c.ModelDir, len(byCase), dst)
	return nil
}

// clearCrossval removes from dir what gatherCrossval puts there: label
// files with their companions, CASE.npz and summary.json (nothing else,
// so that a wrong folder loses nothing but such files).
func clearCrossval(dir string) error {
	names, err := evaluation.LabelNames(dir, "")
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var files []string
	for _, n := range names {
		files = append(files, volume.WrittenFiles(filepath.Join(dir, n))...)
		files = append(files, labelStem(filepath.Join(dir, n))+".npz")
	}
	files = append(files, filepath.Join(dir, "summary.json"))
	for _, f := range files {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// linkOrCopy makes dst a hard link to src, or a copy where the file
// system cannot link (another device); an existing dst is replaced.
func linkOrCopy(src, dst string) error {
	if err := os.Remove(dst); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if os.Link(src, dst) == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	return out.Close()
}
