package data

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/volume"
)

// VerifyOptions say what a run needs of its dataset.
type VerifyOptions struct {
	// NumClasses bounds the labels: every label value must lie in
	// [0, NumClasses) (model.num_classes), or be IgnoreLabel.
	NumClasses int
	// IgnoreLabel is loss.ignore_label (0: none): a label value allowed
	// besides the classes, and the one a dataset.json "ignore" must give.
	IgnoreLabel int
	// Patch is the training patch (D, H, W); a case smaller than it along
	// an axis is padded, which Verify reports.
	Patch [3]int
	// Workers reads cases in parallel (0: the data section's workers).
	Workers int
	// Logger receives the warnings (default slog.Default()).
	Logger *slog.Logger

	// multi is the data section's MultiLabel (set by Verify): labels are
	// bit-packed bytes, valid below 2^NumClasses (or the ignore 255).
	multi bool
	// declared lists the label values dataset.json names (set by Verify;
	// empty: no list to hold the labels to).
	declared []int
	// check replaces checkCase in tests (a read that hangs).
	check func(c Case, channels int, o VerifyOptions) (problems, warnings []string)
}

// Tolerances of the image–label geometry check: spacings may differ by
// this much relative, affine entries by this much times max(1, |entry|).
// nnU-Net's verify_dataset_integrity refuses a label whose spacing,
// origin or direction differs from its image's; a rounding difference in
// the last digits of a header is not such a mix-up.
const (
	spacingTol = 1e-3
	affineTol  = 1e-3
)

// maxListed bounds the problems Verify lists in its error.
const maxListed = 20

// Verify reads every case of cfg's dataset that the run uses — its files'
// headers and all their voxels — before the first step, and fails with
// one error listing each problem that would make training wrong or
// meaningless, each naming its file: a label value outside
// [0, model.num_classes) other than loss.ignore_label; a label whose spacing or affine differs from its
// image's; NaN or infinite image voxels (counted); an empty training fold
// (naming the fold and the splits file). What training can work around is
// logged as a warning: a one-slice (2-D) image in a 3-D dataset and a case
// smaller than the patch, with the padding each implies. Setup must have
// run (splits written).
func Verify(ctx context.Context, cfg config.Data, o VerifyOptions) error {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	ds, ch, err := openWithChannels(cfg)
	if err != nil {
		return err
	}
	for _, w := range ds.Warnings {
		log.Warn(w)
	}
	train, val, from, err := foldCases(ds, cfg)
	if err != nil {
		return err
	}
	if ds.IgnoreLabel != 0 && ds.IgnoreLabel != o.IgnoreLabel {
		// The config, not the data file, says what the loss does: the run's
		// config.yaml stays the one record of it.
		want := "no loss.ignore_label"
		if o.IgnoreLabel != 0 {
			want = fmt.Sprintf("loss.ignore_label %d", o.IgnoreLabel)
		}
		return fmt.Errorf("data: %s's dataset.json has the ignore label %d (labels \"ignore\") but the config has %s; set loss.ignore_label: %d so its voxels are left out of the loss and metrics rather than trained",
			cfg.Dataset, ds.IgnoreLabel, want, ds.IgnoreLabel)
	}
	o.multi = cfg.MultiLabel
	if o.multi && o.NumClasses > 0 && len(ds.MultiLabelNames) != o.NumClasses {
		return fmt.Errorf("model.num_classes: %d, but %s has %d multi-label classes (%s), one output channel each",
			o.NumClasses, cmp.Or(cfg.Manifest, cfg.Dataset), len(ds.MultiLabelNames), strings.Join(ds.MultiLabelNames, ", "))
	}
	for v := range ds.LabelNames {
		o.declared = append(o.declared, v)
	}
	sort.Ints(o.declared)
	if len(train) == 0 {
		return fmt.Errorf("data: fold %d has no training case in %s (%d cases in the dataset)", cfg.Fold, from, len(ds.Cases))
	}
	workers := o.Workers
	if workers <= 0 {
		workers = max(1, cfg.WorkerCount())
	}
	cases := append(append([]int(nil), train...), val...)
	var (
		mu       sync.Mutex
		problems []string
		warnings []string
		busy     = map[int]time.Time{} // case → when a worker started reading it
	)
	// Returning early (a stuck read, a signal) stops handing out cases.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	jobs := make(chan int)
	go func() {
		defer close(jobs)
		for _, i := range cases {
			select {
			case jobs <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for w := 0; w < min(workers, len(cases)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				mu.Lock()
				busy[i] = time.Now()
				mu.Unlock()
				p, warn := verifyCase(ds.Cases[i], ch, o)
				mu.Lock()
				delete(busy, i)
				problems = append(problems, p...)
				warnings = append(warnings, warn...)
				mu.Unlock()
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	// A read that never returns (a FIFO, a hung network mount) must not
	// hold the run before its first step, nor a signal: past
	// data.hard_timeout the case is a problem, and a cancelled ctx returns
	// at once; either way the stuck reader is left behind, as the worker
	// pool abandons one (abandon.go).
	tick := time.NewTicker(verifyTick(cfg.HardTimeout))
	defer tick.Stop()
wait:
	for {
		select {
		case <-done:
			break wait
		case <-ctx.Done():
			return ctx.Err()
		case now := <-tick.C:
			if cfg.HardTimeout <= 0 {
				continue
			}
			mu.Lock()
			var stuck []string
			for i, t0 := range busy {
				if el := now.Sub(t0); el >= cfg.HardTimeout {
					stuck = append(stuck, fmt.Sprintf("%s: reading case %s took longer than data.hard_timeout %v (a read that never returns: a FIFO, a hung network mount?)",
						ds.Cases[i].Images[0], ds.Cases[i].ID, cfg.HardTimeout))
				}
			}
			mu.Unlock()
			if len(stuck) > 0 {
				sort.Strings(stuck)
				return fmt.Errorf("data: the dataset %s could not be checked before the first step:\n  %s", cfg.Dataset, strings.Join(stuck, "\n  "))
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	for _, w := range warnings {
		log.Warn("data: " + w)
	}
	if len(problems) == 0 {
		return nil
	}
	msg := problems
	if len(msg) > maxListed {
		msg = append(msg[:maxListed:maxListed], fmt.Sprintf("... and %d more", len(problems)-maxListed))
	}
	return fmt.Errorf("data: the dataset %s has %d problems that training would not survive or would learn wrong:\n  %s",
		cfg.Dataset, len(problems), strings.Join(msg, "\n  "))
}

// verifyTick is how often Verify looks for a stuck read.
func verifyTick(hard time.Duration) time.Duration {
	if hard > 0 {
		return max(min(hard/4, time.Second), time.Millisecond)
	}
	return time.Second
}

// verified remembers the verdict on each case whose files have not
// changed (path, size, modification time) under the same options, so a
// process that starts many runs on one dataset (a sweep, the tests)
// decodes each case once.
var verified sync.Map // verifyKey → verdict

type verdict struct{ problems, warnings []string }

// verifyKey identifies a case's files as they are now, and the options;
// "" when a file cannot be stat'ed (verifyCase then reports it).
func verifyKey(c Case, channels int, o VerifyOptions) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d|%d|%d|%v|%v|%v", channels, o.NumClasses, o.IgnoreLabel, o.Patch, o.declared, o.multi)
	for _, f := range c.Files() {
		fi, err := os.Stat(volume.FilePath(f))
		if err != nil {
			return ""
		}
		fmt.Fprintf(&b, "|%s|%d|%d", f, fi.Size(), fi.ModTime().UnixNano())
	}
	return b.String()
}

// verifyCase checks one case (or recalls the verdict on its unchanged
// files): its problems (errors) and warnings.
func verifyCase(c Case, channels int, o VerifyOptions) (problems, warnings []string) {
	key := verifyKey(c, channels, o)
	if o.check != nil {
		key = "" // a test's stand-in: neither recalled nor remembered
	}
	if v, ok := verified.Load(key); ok && key != "" {
		v := v.(verdict)
		return v.problems, v.warnings
	}
	check := checkCase
	if o.check != nil {
		check = o.check
	}
	problems, warnings = check(c, channels, o)
	if key != "" {
		verified.Store(key, verdict{problems, warnings})
	}
	return problems, warnings
}

// constant reports whether every value of x equals the first.
func constant(x []float32) bool {
	for _, v := range x[1:] {
		if v != x[0] {
			return false
		}
	}
	return true
}

// checkCase reads case c whole and checks it.
func checkCase(c Case, channels int, o VerifyOptions) (problems, warnings []string) {
	var v Volume
	var bufs readBufs
	if err := decodeCase(c, channels, &v, &bufs, 0); err != nil {
		return []string{err.Error()}, nil
	}
	// NaN and infinite voxels, per file (a case's channels are its files
	// in order, or one 4D file).
	bad := make([]int, len(v.Image))
	for k, img := range v.Image {
		for _, x := range img {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				bad[k]++
			}
		}
	}
	for k, n := range bad {
		f := c.Images[min(k, len(c.Images)-1)]
		if n > 0 {
			problems = append(problems, fmt.Sprintf("%s: %d NaN or infinite voxels (channel %d)", f, n, k))
		} else if img := v.Image[k]; len(img) > 0 && constant(img) {
			// Trainable (a z-score makes it zeros), but most likely a
			// failed export or the wrong file.
			warnings = append(warnings, fmt.Sprintf("%s: channel %d is constant (every voxel %g): it carries no information", f, k, img[0]))
		}
	}
	if c.Label != "" {
		hist := [256]int{}
		for _, l := range v.Label {
			hist[l]++
		}
		if o.multi && o.NumClasses > 0 {
			for val := 1 << o.NumClasses; val < 256; val++ {
				if hist[val] > 0 && val != o.IgnoreLabel {
					problems = append(problems, fmt.Sprintf("%s: bit-packed label byte %d in %d voxels has a bit above the %d classes (model.num_classes)",
						c.Label, val, hist[val], o.NumClasses))
				}
			}
		}
		for val := o.NumClasses; val < 256 && o.NumClasses > 0 && !o.multi; val++ {
			if hist[val] > 0 && val != o.IgnoreLabel {
				problems = append(problems, fmt.Sprintf("%s: label value %d in %d voxels, outside 0..%d (model.num_classes: %d)",
					c.Label, val, hist[val], o.NumClasses-1, o.NumClasses))
			}
		}
		if len(o.declared) > 0 {
			known := [256]bool{}
			for _, d := range o.declared {
				if d >= 0 && d < 256 {
					known[d] = true
				}
			}
			for val := 0; val < 256 && (o.NumClasses <= 0 || val < o.NumClasses); val++ {
				if hist[val] > 0 && !known[val] {
					problems = append(problems, fmt.Sprintf("%s: label value %d in %d voxels is not among dataset.json's labels %v",
						c.Label, val, hist[val], o.declared))
				}
			}
		}
		if p := geometryMismatch(c, &v); p != "" {
			problems = append(problems, p)
		}
	}
	var thin []string
	for a, n := range v.Shape {
		if n == 1 {
			thin = append(thin, "DHW"[a:a+1])
		}
	}
	if len(thin) > 0 {
		warnings = append(warnings, fmt.Sprintf("%s is a single slice along %s (shape %v) in a 3-D dataset: its patches repeat padding along that axis",
			c.Images[0], strings.Join(thin, ", "), v.Shape))
	}
	var pad []string
	for a := range v.Shape {
		if o.Patch[a] > v.Shape[a] {
			pad = append(pad, fmt.Sprintf("%s by %d", "DHW"[a:a+1], o.Patch[a]-v.Shape[a]))
		}
	}
	if len(pad) > 0 && len(thin) == 0 {
		warnings = append(warnings, fmt.Sprintf("%s (shape %v) is smaller than the patch %v: its patches are padded along %s",
			c.Images[0], v.Shape, o.Patch, strings.Join(pad, ", ")))
	}
	return problems, warnings
}

// geometryMismatch compares the label's spacing and affine with the first
// image's (v, as decodeCase read it); "" when they agree within the
// tolerances.
//
// Units: when both files state one (volume.Header.Unit) the label's
// spacing and affine are converted into the image's before comparing —
// a label in micrometres on an image in nanometres is on its grid when
// its numbers are a thousandth; a unit that is not a length is a problem
// naming both files. When either states none they are compared as they
// are, as a dataset manifest takes them (see loadManifest).
func geometryMismatch(c Case, v *Volume) string {
	hi := volume.Header{Spacing: v.Spacing, Unit: v.Unit, Affine: v.Affine}
	hf, err := header(c.Label)
	if err != nil {
		return err.Error()
	}
	hl, err := hf.InUnit(hi.Unit)
	if err != nil {
		return fmt.Sprintf("%s (image %s in %s, label %s in %s): %v", c.Label, c.Images[0], volume.UnitName(hi.Unit), c.Label, volume.UnitName(hf.Unit), err)
	}
	for a := range hi.Spacing {
		if math.Abs(hi.Spacing[a]-hl.Spacing[a]) > spacingTol*max(math.Abs(hi.Spacing[a]), math.Abs(hl.Spacing[a])) {
			return fmt.Sprintf("%s: voxel spacing %v%s differs from its image's %v%s (%s): image and label are not on the same grid",
				c.Label, hf.Spacing, unitSuffix(hf.Unit), hi.Spacing, unitSuffix(hi.Unit), c.Images[0])
		}
	}
	if c.Placed {
		return "" // the manifest placed the crop; its file's origin is not used
	}
	for r := 0; r < 3; r++ {
		for k := 0; k < 4; k++ {
			a, b := hi.Affine[r][k], hl.Affine[r][k]
			if math.Abs(a-b) > affineTol*max(1, math.Abs(a)) {
				return fmt.Sprintf("%s: affine row %d %v differs from its image's %v (%s): image and label are not in the same place",
					c.Label, r, hl.Affine[r], hi.Affine[r], c.Images[0])
			}
		}
	}
	return ""
}

// header reads a volume file's header.
func header(path string) (volume.Header, error) {
	f, err := volume.Open(path)
	if err != nil {
		return volume.Header{}, err
	}
	h := f.Header()
	if err := f.Close(); err != nil {
		return h, fmt.Errorf("%s: %w", path, err)
	}
	return h, nil
}
