// Launch recipes of skel.cu: clDice's soft skeleton and its backward.

package kernels

import "fmt"

// SkeletonScratchBytes returns the scratch SoftSkeletonBackward needs for
// a tensor of elems floats and iters iterations (it keeps the forward's
// intermediates); SoftSkeleton needs 3·4·elems bytes of it.
func SkeletonScratchBytes(elems, iters int) int { return 4 * elems * (4*iters + 6) }

// skelArgs checks a soft-skeleton call and returns its geometry arguments.
func skelArgs(op string, n, d, h, w, c, iters, fromC int) ([]any, error) {
	if n <= 0 || d <= 0 || h <= 0 || w <= 0 || c <= 0 {
		return nil, fmt.Errorf("kernels.%s: shape (%d, %d, %d, %d, %d) must be positive", op, n, d, h, w, c)
	}
	if iters < 0 || fromC < 0 {
		return nil, fmt.Errorf("kernels.%s: iters %d, fromC %d must be non-negative", op, iters, fromC)
	}
	if err := checkSizes(op, []int{n, d, h, w, c}); err != nil {
		return nil, err
	}
	return []any{i32(n), i32(d), i32(h), i32(w), i32(c), i32(min(fromC, c))}, nil
}

// SoftSkeleton writes clDice's soft skeleton of every channel >= fromC of
// x (n, d, h, w, c) to skel (zero below fromC); see skel.cu.
func (o Ops[B]) SoftSkeleton(x, skel, scratch B, n, d, h, w, c, iters, fromC int) error {
	geo, err := skelArgs("SoftSkeleton", n, d, h, w, c, iters, fromC)
	if err != nil {
		return err
	}
	elems := n * d * h * w * c
	run := func(k Kernel, bufs ...any) error { return o.launch1(k, elems, append(bufs, geo...)...) }
	cur, next := scratch, o.Launcher.Offset(scratch, 4*elems)
	open := o.Launcher.Offset(scratch, 8*elems)
	// img_1 = erode(x), open_0 = dilate(img_1), skel_0 = relu(x - open_0).
	if err := run(kSkelErode, x, cur); err != nil {
		return err
	}
	if err := run(kSkelDilate, cur, open); err != nil {
		return err
	}
	if err := run(kSkelInit, x, open, skel); err != nil {
		return err
	}
	for j := 1; j <= iters; j++ { // cur holds img_j
		if err := run(kSkelErode, cur, next); err != nil {
			return err
		}
		if err := run(kSkelDilate, next, open); err != nil {
			return err
		}
		if err := run(kSkelStep, cur, open, skel, skel); err != nil {
			return err
		}
		cur, next = next, cur
	}
	return nil
}

// SoftSkeletonBackward adds to dx the gradient of Σ dskel·SoftSkeleton(x)
// (channels >= fromC). It recomputes the forward's intermediates in scratch
// (SkeletonScratchBytes).
func (o Ops[B]) SoftSkeletonBackward(x, dskel, dx, scratch B, n, d, h, w, c, iters, fromC int) error {
	geo, err := skelArgs("SoftSkeletonBackward", n, d, h, w, c, iters, fromC)
	if err != nil {
		return err
	}
	elems := n * d * h * w * c
	run := func(k Kernel, bufs ...any) error { return o.launch1(k, elems, append(bufs, geo...)...) }
	next := 0
	vol := func() B { b := o.Launcher.Offset(scratch, 4*elems*next); next++; return b }
	imgs := []B{x} // img_0 .. img_{iters+1}
	opens := make([]B, iters+1)
	for j := 0; j <= iters; j++ {
		imgs = append(imgs, vol())
		opens[j] = vol()
		if err := run(kSkelErode, imgs[j], imgs[j+1]); err != nil {
			return err
		}
		if err := run(kSkelDilate, imgs[j+1], opens[j]); err != nil {
			return err
		}
	}
	skels := make([]B, iters) // skel_0 .. skel_{iters-1}
	for j := range skels {
		skels[j] = vol()
		if j == 0 {
			err = run(kSkelInit, x, opens[0], skels[0])
		} else {
			err = run(kSkelStep, imgs[j], opens[j], skels[j-1], skels[j])
		}
		if err != nil {
			return err
		}
	}
	ds, dopen := vol(), vol()
	if err := o.Copy(ds, dskel, elems); err != nil {
		return err
	}
	dimgs := make([]B, iters+2)
	for j := range dimgs {
		dimgs[j] = vol()
		if err := o.Fill(dimgs[j], elems, 0); err != nil {
			return err
		}
	}
	for j := iters; j >= 0; j-- {
		var prev B
		if j > 0 {
			prev = skels[j-1]
		}
		if err := run(kSkelBwdStep, imgs[j], opens[j], prev, ds, dimgs[j], dopen); err != nil {
			return err
		}
		if err := run(kSkelDilateBwd, imgs[j+1], dopen, dimgs[j+1]); err != nil {
			return err
		}
	}
	for j := iters + 1; j >= 1; j-- {
		if err := run(kSkelErodeBwd, imgs[j-1], dimgs[j], dimgs[j-1]); err != nil {
			return err
		}
	}
	return run(kSkelAccum, dx, dimgs[0])
}
