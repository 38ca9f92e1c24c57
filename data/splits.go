package data

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/internal/atomicfile"
	"github.com/voxtrain/voxtrain/internal/nprand"
)

// foldSplit is one cross-validation fold: case IDs to train on and to validate
// on. The JSON form is nnU-Net's splits_final.json entry.
type foldSplit struct {
	Train []string `json:"train"`
	Val   []string `json:"val"`
}

// splitSeed is nnU-Net's: generate_crossval_split and do_split's 80:20
// fallback both seed RandomState(12345). It must never depend on the
// training seed, or changing the seed would move cases between folds.
const splitSeed = 12345

// splitsFileName is the file nnU-Net keeps its folds in.
const splitsFileName = "splits_final.json"

// makeFolds splits the IDs into k folds as nnU-Net v2 does
// (generate_crossval_split over np.sort of the identifiers): scikit-learn's
// KFold(k, shuffle=True, random_state=12345), that is, the sorted IDs'
// positions permuted by NumPy's legacy RandomState(12345).shuffle and cut
// into k contiguous parts, the first n mod k one case larger. A fold's val
// lists its part and train the rest, both sorted as KFold's indices are.
func makeFolds(ids []string, k int) ([]foldSplit, error) {
	if k < 2 {
		return nil, fmt.Errorf("make folds: %d folds, want ≥ 2", k)
	}
	if len(ids) < k {
		return nil, fmt.Errorf("make folds: %d cases cannot fill %d folds", len(ids), k)
	}
	s := sortedIDs(ids)
	perm := nprand.New(splitSeed).Perm(len(s))
	folds := make([]foldSplit, k)
	start := 0
	for f := range folds {
		n := len(s) / k
		if f < len(s)%k {
			n++
		}
		folds[f] = splitAt(s, perm[start:start+n])
		start += n
	}
	return folds, nil
}

// makeHoldout returns the one split of holdout_fraction p: of the sorted
// IDs' positions permuted by RandomState(12345) (the permutation
// makeFolds cuts), the first ⌊n·(1−p)⌋ train and the rest validate. For
// p = 0.2 this is nnU-Net's random 80:20 split (do_split for fold 0 past
// the splits file: RandomState(12345).choice(n, int(n*0.8),
// replace=False), the permutation's head).
func makeHoldout(ids []string, p float64) ([]foldSplit, error) {
	s := sortedIDs(ids)
	nTrain := int(float64(len(s)) * (1 - p))
	if nTrain < 1 || nTrain >= len(s) {
		return nil, fmt.Errorf("make hold-out split: holdout_fraction %g of %d cases leaves %d to train and %d to validate, want at least one of each",
			p, len(s), nTrain, len(s)-nTrain)
	}
	perm := nprand.New(splitSeed).Perm(len(s))
	return []foldSplit{splitAt(s, perm[nTrain:])}, nil
}

func sortedIDs(ids []string) []string {
	s := append([]string(nil), ids...)
	// Go's byte order is NumPy's code-point order for UTF-8 strings.
	sort.Strings(s)
	return s
}

// splitAt returns the split validating on the sorted IDs s at positions
// val and training on the others, both lists in sorted order.
func splitAt(s []string, val []int) foldSplit {
	isVal := make([]bool, len(s))
	for _, i := range val {
		isVal[i] = true
	}
	f := foldSplit{Train: []string{}, Val: []string{}}
	for i, id := range s {
		if isVal[i] {
			f.Val = append(f.Val, id)
		} else {
			f.Train = append(f.Train, id)
		}
	}
	return f
}

// generateSplits returns the splits cfg asks for, generated: the hold-out
// split when holdout_fraction is set, else num_folds folds.
func generateSplits(ds *Dataset, cfg config.Data) ([]foldSplit, error) {
	if cfg.HoldoutFraction > 0 {
		return makeHoldout(caseIDs(ds), cfg.HoldoutFraction)
	}
	return makeFolds(caseIDs(ds), cfg.NumFolds)
}

// encodeSplits is the file nnU-Net's save_json writes for the splits:
// four-space indentation, keys in order, no final newline, no escaping of
// <, > and & (Python's json.dump escapes non-ASCII characters, which this
// writes as UTF-8: the same JSON, other bytes, for such IDs only).
func encodeSplits(folds []foldSplit) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "    ")
	enc.Encode(folds) // strings and slices: cannot fail
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// caseIDs returns the dataset's case IDs in order.
func caseIDs(ds *Dataset) []string {
	ids := make([]string, len(ds.Cases))
	for i, c := range ds.Cases {
		ids[i] = c.ID
	}
	return ids
}

// splitsFile returns the file cfg's splits are read from, "" for none
// (generate them): splits_file when set, whether it exists or not;
// for k folds, else an existing splits_final.json in the store folder
// (when data.store is set) or the dataset folder, as nnU-Net's
// preprocessed folders carry. A hold-out split never takes those k-fold
// files.
func splitsFile(cfg config.Data) (string, error) {
	if cfg.SplitsFile != "" {
		return cfg.SplitsFile, nil
	}
	if cfg.HoldoutFraction > 0 {
		return "", nil
	}
	for _, dir := range []string{cfg.Store, cfg.Dataset} {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, splitsFileName)
		_, err := os.Stat(p)
		if err == nil {
			return p, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("splits: %w", err)
		}
	}
	return "", nil
}

// generatedSplitsName is the file name generated splits are written under
// in a training's experiment folder: nnU-Net's for k folds, one per
// fraction for a hold-out split (so runs with different fractions, or
// k-fold runs, of one experiment do not clash).
func generatedSplitsName(cfg config.Data) string {
	if cfg.HoldoutFraction > 0 {
		return "splits_holdout_" + strconv.FormatFloat(cfg.HoldoutFraction, 'g', -1, 64) + ".json"
	}
	return splitsFileName
}

// setupSplits settles where cfg's splits live and returns cfg with
// splits_file set to that file, so that the run's saved config names it:
// splitsFile's when there is one (splits_file itself written now when it
// does not exist yet), else the generated splits written to dir (a
// training's experiment folder), or, with no dir, cfg unchanged and the
// splits generated again, identically, wherever they are read. The dataset
// and store folders are only read.
func setupSplits(ds *Dataset, cfg config.Data, dir string) (config.Data, error) {
	path, err := splitsFile(cfg)
	if err != nil {
		return cfg, err
	}
	if path == "" {
		if dir == "" {
			return cfg, nil
		}
		path = filepath.Join(dir, generatedSplitsName(cfg))
	}
	if _, err := os.Stat(path); err == nil {
		// Checked now rather than at the first epoch's validation.
		if _, err := readSplits(ds, cfg, path); err != nil {
			return cfg, err
		}
		cfg.SplitsFile = path
		return cfg, nil
	}
	folds, err := generateSplits(ds, cfg)
	if err != nil {
		return cfg, fmt.Errorf("splits %s: %w", path, err)
	}
	// Shared as the run's other outputs are: the umask's modes.
	err = os.MkdirAll(filepath.Dir(path), 0o777)
	if err == nil {
		err = atomicfile.WriteFileUmask(path, encodeSplits(folds), 0o666)
	}
	if err != nil {
		return cfg, fmt.Errorf("write splits %s: %w", path, err)
	}
	cfg.SplitsFile = path
	return cfg, nil
}

// readSplits returns the splits in path. An existing file must have the
// split count cfg asks for (num_folds, or 1 with holdout_fraction) and
// name only cases of the dataset, and every case must appear in it (in
// some fold's val list for k folds, in the split for a hold-out): a
// dataset that changed under a splits file is an error rather than
// silently new folds.
func readSplits(ds *Dataset, cfg config.Data, path string) ([]foldSplit, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read splits: %w", err)
	}
	var folds []foldSplit
	if err := json.Unmarshal(b, &folds); err != nil {
		return nil, fmt.Errorf("parse splits %s: %w", path, err)
	}
	holdout := cfg.HoldoutFraction > 0
	switch {
	case holdout && len(folds) != 1:
		return nil, fmt.Errorf("splits %s has %d splits but holdout_fraction %g wants one (give another data.splits_file, or delete the file to regenerate it)", path, len(folds), cfg.HoldoutFraction)
	case !holdout && len(folds) != cfg.NumFolds:
		return nil, fmt.Errorf("splits %s has %d folds but num_folds is %d (give another data.splits_file, or delete the file to regenerate it)", path, len(folds), cfg.NumFolds)
	}
	inVal, inAny := map[string]int{}, map[string]bool{}
	for f, fold := range folds {
		for _, id := range append(append([]string(nil), fold.Train...), fold.Val...) {
			if ds.Index(id) < 0 {
				return nil, fmt.Errorf("splits %s: fold %d names case %q, which is not in the dataset", path, f, id)
			}
			inAny[id] = true
		}
		for _, id := range fold.Val {
			inVal[id]++
		}
	}
	for _, c := range ds.Cases {
		switch {
		case holdout && !inAny[c.ID]:
			return nil, fmt.Errorf("splits %s: case %q of the dataset is in neither train nor val (dataset changed? delete the file to regenerate it)", path, c.ID)
		case !holdout && inVal[c.ID] == 0:
			return nil, fmt.Errorf("splits %s: case %q of the dataset is in no fold's val list (dataset changed? delete the file to regenerate it)", path, c.ID)
		}
	}
	return folds, nil
}

// loadSplits returns cfg's splits: from its file (see splitsFile) when
// that exists, else generated, what setupSplits would write. It writes
// nothing. from names the source for messages.
func loadSplits(ds *Dataset, cfg config.Data) (folds []foldSplit, from string, err error) {
	path, err := splitsFile(cfg)
	if err != nil {
		return nil, "", err
	}
	if path != "" {
		if _, err := os.Stat(path); err == nil {
			folds, err := readSplits(ds, cfg, path)
			return folds, path, err
		}
	}
	from = "the generated folds"
	if cfg.HoldoutFraction > 0 {
		from = fmt.Sprintf("the generated hold-out split (holdout_fraction %g)", cfg.HoldoutFraction)
	}
	folds, err = generateSplits(ds, cfg)
	if err != nil {
		return nil, "", fmt.Errorf("splits: %w", err)
	}
	return folds, from, nil
}

// FoldCases returns the indices of the training and validation cases of
// cfg.Fold (fold -1: every case trains, none validates), from the splits
// file or generated (see loadSplits).
func FoldCases(ds *Dataset, cfg config.Data) (train, val []int, err error) {
	train, val, _, err = foldCases(ds, cfg)
	return train, val, err
}

// foldCases is FoldCases, also naming where the splits came from.
func foldCases(ds *Dataset, cfg config.Data) (train, val []int, from string, err error) {
	if cfg.Fold == -1 {
		train = make([]int, len(ds.Cases))
		for i := range train {
			train[i] = i
		}
		return train, nil, "every case", nil
	}
	folds, from, err := loadSplits(ds, cfg)
	if err != nil {
		return nil, nil, "", err
	}
	if cfg.Fold < 0 || cfg.Fold >= len(folds) {
		return nil, nil, "", fmt.Errorf("data.fold: %d, the splits (%s) have folds 0..%d (or -1: every case)", cfg.Fold, from, len(folds)-1)
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
	return train, val, from, nil
}
