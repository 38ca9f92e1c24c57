package data

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/internal/atomicfile"
)

// foldSplit is one cross-validation fold: case IDs to train on and to validate
// on. The JSON form is nnU-Net's splits_final.json entry.
type foldSplit struct {
	Train []string `json:"train"`
	Val   []string `json:"val"`
}

// splitSeed fixes the fold assignment: it must never depend on the
// training seed, or changing the seed would move cases between folds.
const splitSeed = 12345

// makeFolds splits the IDs into k folds deterministically: the IDs are
// sorted, shuffled with a fixed-seed PCG, and cut into k contiguous parts
// (the first n mod k one case larger, as scikit-learn's KFold). Each fold's
// lists are sorted.
func makeFolds(ids []string, k int) ([]foldSplit, error) {
	if k < 2 {
		return nil, fmt.Errorf("make folds: %d folds, want ≥ 2", k)
	}
	if len(ids) < k {
		return nil, fmt.Errorf("make folds: %d cases cannot fill %d folds", len(ids), k)
	}
	s := append([]string(nil), ids...)
	sort.Strings(s)
	r := rand.New(rand.NewPCG(splitSeed, 0x9e3779b97f4a7c15))
	r.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
	folds := make([]foldSplit, k)
	start := 0
	for f := range folds {
		n := len(s) / k
		if f < len(s)%k {
			n++
		}
		val := append([]string(nil), s[start:start+n]...)
		train := append(append([]string(nil), s[:start]...), s[start+n:]...)
		sort.Strings(val)
		sort.Strings(train)
		folds[f] = foldSplit{Train: train, Val: val}
		start += n
	}
	return folds, nil
}

// caseIDs returns the dataset's case IDs in order.
func caseIDs(ds *Dataset) []string {
	ids := make([]string, len(ds.Cases))
	for i, c := range ds.Cases {
		ids[i] = c.ID
	}
	return ids
}

// writeSplits writes the folds of ds to path, from makeFolds, unless the
// file exists (it is then left as it is, so a fold stays the same cases
// on every machine and in every run).
func writeSplits(ds *Dataset, k int, path string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	folds, err := makeFolds(caseIDs(ds), k)
	if err != nil {
		return fmt.Errorf("splits %s: %w", path, err)
	}
	out, _ := json.MarshalIndent(folds, "", "  ")
	// Beside the store or the dataset, shared as they are: the umask's
	// modes.
	err = os.MkdirAll(filepath.Dir(path), 0o777)
	if err == nil {
		err = atomicfile.WriteFileUmask(path, append(out, '\n'), 0o666)
	}
	if err != nil {
		return fmt.Errorf("write splits %s: %w", path, err)
	}
	return nil
}

// readSplits returns the folds in path, or those makeFolds gives the
// dataset when there is no file yet (what writeSplits would write). An
// existing file must have k folds and name only cases of the dataset, and
// every case must appear in it: a dataset that changed under a splits
// file is an error rather than silently new folds.
func readSplits(ds *Dataset, k int, path string) ([]foldSplit, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		folds, err := makeFolds(caseIDs(ds), k)
		if err != nil {
			return nil, fmt.Errorf("splits %s: %w", path, err)
		}
		return folds, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read splits: %w", err)
	}
	var folds []foldSplit
	if err := json.Unmarshal(b, &folds); err != nil {
		return nil, fmt.Errorf("parse splits %s: %w", path, err)
	}
	if len(folds) != k {
		return nil, fmt.Errorf("splits %s has %d folds but num_folds is %d (delete the file to regenerate it)", path, len(folds), k)
	}
	inVal := map[string]int{}
	for f, fold := range folds {
		for _, id := range append(append([]string(nil), fold.Train...), fold.Val...) {
			if ds.Index(id) < 0 {
				return nil, fmt.Errorf("splits %s: fold %d names case %q, which is not in the dataset", path, f, id)
			}
		}
		for _, id := range fold.Val {
			inVal[id]++
		}
	}
	for _, c := range ds.Cases {
		if inVal[c.ID] == 0 {
			return nil, fmt.Errorf("splits %s: case %q of the dataset is in no fold's val list (dataset changed? delete the file to regenerate it)", path, c.ID)
		}
	}
	return folds, nil
}

// FoldCases returns the indices of the training and validation cases of
// cfg.Fold (fold -1: every case trains, none validates), from the splits
// file (see readSplits).
func FoldCases(ds *Dataset, cfg config.Data) (train, val []int, err error) {
	if cfg.Fold == -1 {
		train = make([]int, len(ds.Cases))
		for i := range train {
			train[i] = i
		}
		return train, nil, nil
	}
	folds, err := readSplits(ds, cfg.NumFolds, cfg.SplitsPath())
	if err != nil {
		return nil, nil, err
	}
	if cfg.Fold < 0 || cfg.Fold >= len(folds) {
		return nil, nil, fmt.Errorf("data.fold: %d, the splits in %s have folds 0..%d (or -1: every case)", cfg.Fold, cfg.SplitsPath(), len(folds)-1)
	}
	f := folds[cfg.Fold]
	for _, id := range f.Train {
		train = append(train, ds.Index(id))
	}
	for _, id := range f.Val {
		val = append(val, ds.Index(id))
	}
	sort.Ints(train)
	sort.Ints(val)
	return train, val, nil
}
