package infer

import "testing"

// TestMultiLabelLabels: nnU-Net regions paint regions_class_order's
// values, later regions over earlier ones (BraTS: whole tumour 2, core 1,
// enhancing 3 inside each other); without an order the classes above 0.5
// are bit-packed.
func TestMultiLabelLabels(t *testing.T) {
	// 3 channels × 5 voxels, channel-major.
	probs := []float32{
		0.9, 0.9, 0.9, 0.2, 0.6, // whole
		0.1, 0.8, 0.7, 0.1, 0.4, // core
		0.1, 0.1, 0.95, 0.9, 0.5, // enhancing (voxel 3 without the others)
	}
	got := MultiLabelLabels(probs, 3, 5, []int{2, 1, 3})
	for i, w := range []uint8{2, 1, 3, 3, 2} {
		if got[i] != w {
			t.Errorf("regions: voxel %d is %d, want %d", i, got[i], w)
		}
	}
	got = MultiLabelLabels(probs, 3, 5, nil)
	for i, w := range []uint8{1, 3, 7, 4, 1} {
		if got[i] != w {
			t.Errorf("bits: voxel %d is %08b, want %08b", i, got[i], w)
		}
	}
	x := []float32{0, 2, -2}
	Sigmoid(x)
	if x[0] != 0.5 || x[1] < 0.88 || x[1] > 0.881 || x[1]+x[2] < 0.99999 || x[1]+x[2] > 1.00001 {
		t.Errorf("Sigmoid: %v", x)
	}
}
