package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/voxtrain/voxtrain/checkpoint"
)

// A training output folder (<output_dir>/<experiment>, nnU-Net's
// trained model folder) holds fold_<k>/run_<r>/ for each fold and run id
// trained, fold_all/ for a run on every case (predict --model-dir and
// find-best read it).

// foldRunDir is the run folder of fold (-1: fold_all) and run id run in
// modelDir.
func foldRunDir(modelDir string, fold, run int) string {
	return filepath.Join(modelDir, checkpoint.FoldDir(fold), fmt.Sprintf("run_%d", run))
}

// modelFolds lists the folds k ≥ 0 of modelDir's fold_<k> folders for
// which has(k) holds, increasing (fold_all is not one: as nnU-Net's
// auto_detect_available_folds).
func modelFolds(modelDir string, has func(fold int) bool) ([]int, error) {
	ents, err := os.ReadDir(modelDir)
	if err != nil {
		return nil, err
	}
	var folds []int
	for _, e := range ents {
		k, ok := checkpoint.ParseFoldDir(e.Name())
		if !ok || k < 0 || !e.IsDir() {
			continue
		}
		if has(k) {
			folds = append(folds, k)
		}
	}
	slices.Sort(folds)
	return folds, nil
}

// isModelDir reports whether dir is a training output folder: it has a
// fold_<k> folder with a run in it.
func isModelDir(dir string) bool {
	folds, err := modelFolds(dir, func(k int) bool {
		runs, _ := filepath.Glob(filepath.Join(dir, checkpoint.FoldDir(k), "run_*"))
		return len(runs) > 0
	})
	return err == nil && len(folds) > 0
}
