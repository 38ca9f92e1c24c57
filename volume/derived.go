package volume

import "fmt"

// OpenDerived opens the derived volume path names by its outermost suffix
// — a resampled label (ResampledPath), a masked one (MaskedPath), a
// looked-up one (LUTPath), bit-packed classes (PackedPath), a window
// (WindowPath) — reading the files it names through open; ok is false
// (and nothing opened) when path names a plain file. Open passes itself
// and own true: the derived volume then owns the files it opened, which
// are closed again when it cannot be made. A caller whose open hands out
// shared handles (a loader keeping every store open) passes own false:
// they are left open, and the derived volume's Close must not be called.
func OpenDerived(path string, open func(string) (File, error), own bool) (f File, ok bool, err error) {
	var opened []File
	get := func(p string) (File, error) {
		f, err := open(p)
		if err == nil {
			opened = append(opened, f)
		}
		return f, err
	}
	fail := func(err error) (File, bool, error) {
		if own {
			for _, f := range opened {
				f.Close()
			}
		}
		return nil, true, err
	}
	named := func(err error) (File, bool, error) { return fail(fmt.Errorf("%s: %w", path, err)) }

	// The resampling is the outermost suffix: it may resample a masked
	// label. A window after it (a manifest crop's box of its raw read at
	// the target spacing) is outermost instead: SplitResample leaves that
	// path to SplitWindow below.
	if base, r, ok, err := SplitResample(path); err != nil {
		return nil, true, err
	} else if ok {
		bf, err := get(base)
		if err != nil {
			return fail(err)
		}
		if f, err = Resampled(bf, r); err != nil {
			return named(err)
		}
		return f, true, nil
	}
	if label, mask, value, ok, err := SplitMask(path); err != nil {
		return nil, true, err
	} else if ok {
		lf, err := get(label)
		if err != nil {
			return fail(err)
		}
		mf, err := get(mask)
		if err != nil {
			return fail(fmt.Errorf("mask: %w", err))
		}
		if f, err = Masked(lf, mf, value); err != nil {
			return named(err)
		}
		return f, true, nil
	}
	if base, lut, ok, err := SplitLUT(path); err != nil {
		return nil, true, err
	} else if ok {
		bf, err := get(base)
		if err != nil {
			return fail(err)
		}
		if f, err = LookedUp(bf, lut); err != nil {
			return named(err)
		}
		return f, true, nil
	}
	if paths, ok, err := SplitPacked(path); err != nil {
		return nil, true, err
	} else if ok {
		files := map[int]File{}
		for c, p := range paths {
			if files[c], err = get(p); err != nil {
				return fail(fmt.Errorf("class %d: %w", c, err))
			}
		}
		if f, err = Packed(files, paths); err != nil {
			return named(err)
		}
		return f, true, nil
	}
	if base, box, ok, err := SplitWindow(path); err != nil {
		return nil, true, err
	} else if ok {
		bf, err := get(base)
		if err != nil {
			return fail(err)
		}
		if f, err = Window(bf, box); err != nil {
			return named(err)
		}
		return f, true, nil
	}
	return nil, false, nil
}
