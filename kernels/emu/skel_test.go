//go:build cgo

package emu

import (
	"fmt"
	"testing"

	"github.com/voxtrain/voxtrain/kernels"
	"github.com/voxtrain/voxtrain/nn"
)

// TestSoftSkeleton compares clDice's soft skeleton and its backward with the
// CPU device. The kernels repeat the CPU's float32 operations and visit the
// pooling windows' contributions in the CPU's scatter order, so results are
// bit-exact (on amd64). Values are quantised to quarters so that pooling
// windows and elementwise minima have many ties, whose tie rules (first in
// scan order; halved gradients) the kernels must follow.
func TestSoftSkeleton(t *testing.T) {
	r := rng(60)
	atol, rtol := exact()
	for _, tc := range []struct {
		n, d, h, w, c, iters, fromC int
	}{
		{2, 4, 5, 6, 3, 3, 1},
		{1, 1, 4, 7, 2, 2, 0}, // a single slice
		{1, 3, 3, 3, 2, 0, 1}, // no iterations
	} {
		shape := nn.Shape{tc.n, tc.d, tc.h, tc.w, tc.c}
		elems := shape.Len()
		x := make([]float32, elems)
		for i := range x {
			x[i] = float32(r.IntN(5)) / 4
		}
		dskel := uniform(r, elems, -1, 1)
		for i := 0; i < elems; i += 3 {
			dskel[i] = 0
		}
		dx0 := uniform(r, elems, -1, 1)
		name := fmt.Sprintf("%v, %d iterations, from channel %d", shape, tc.iters, tc.fromC)

		sc := scratch(t, kernels.SkeletonScratchBytes(elems, tc.iters))
		skel := scratch(t, 4*elems)
		xb := buf(t, x)
		must(t, ops.SoftSkeleton(xb, skel, sc, tc.n, tc.d, tc.h, tc.w, tc.c, tc.iters, tc.fromC))
		ref := tensor(shape, make([]float32, elems))
		dev.SoftSkeleton(tensor(shape, x), ref, tc.iters, tc.fromC)
		compare(t, "skel_erode+skel_dilate+skel_init+skel_step", "cpu.Device.SoftSkeleton ("+name+")", skel.F32(), ref.Data(), atol, rtol)

		dx := buf(t, dx0)
		must(t, ops.SoftSkeletonBackward(xb, buf(t, dskel), dx, sc, tc.n, tc.d, tc.h, tc.w, tc.c, tc.iters, tc.fromC))
		dref := tensor(shape, dx0)
		dev.SoftSkeletonBackward(tensor(shape, x), tensor(shape, dskel), dref, tc.iters, tc.fromC)
		compare(t, "skel_bwd_step+skel_dilate_bwd+skel_erode_bwd+skel_accum", "cpu.Device.SoftSkeletonBackward ("+name+")", dx.F32(), dref.Data(), atol, rtol)
	}
}
