package preprocess

import (
	"math"
	"testing"

	"github.com/voxtrain/voxtrain/internal/testutil"
)

func TestZScore(t *testing.T) {
	x := []float32{1, 2, 3, 4, 10}
	want := []float64{1, 2, 3, 4, 10}
	m, sd := 4.0, 0.0
	for _, v := range want {
		sd += (v - m) * (v - m)
	}
	sd = math.Sqrt(sd / 5) // population std, as numpy
	gm, gs, err := ZScore(x, nil)
	if err != nil || math.Abs(gm-m) > 1e-12 || math.Abs(gs-sd) > 1e-12 {
		t.Fatalf("mean %v std %v err %v", gm, gs, err)
	}
	for i := range want {
		want[i] = (want[i] - m) / sd
	}
	testutil.CloseTo(t, "zscore", x, want, 1e-6)

	// With a mask: statistics and normalisation inside only.
	y := []float32{0, 5, 7, 0, 9}
	mask := []uint8{0, 1, 1, 0, 1}
	gm, gs, err = ZScore(y, mask)
	if err != nil || math.Abs(gm-7) > 1e-12 {
		t.Fatal(gm, err)
	}
	wantSD := math.Sqrt((4 + 0 + 4) / 3.0)
	if math.Abs(gs-wantSD) > 1e-12 {
		t.Fatalf("masked std %v want %v", gs, wantSD)
	}
	testutil.CloseTo(t, "masked zscore", y, []float64{0, -2 / wantSD, 0, 0, 2 / wantSD}, 1e-6)
	if _, _, err := ZScore(y, []uint8{0, 0, 0, 0, 0}); err == nil {
		t.Fatal("empty mask accepted")
	}
	if _, _, err := ZScore(y, []uint8{1}); err == nil {
		t.Fatal("short mask accepted")
	}
	// Constant image: std floored at 1e-8, no NaN.
	z := []float32{3, 3, 3}
	if _, _, err := ZScore(z, nil); err != nil || z[0] != 0 {
		t.Fatal(z, err)
	}
}

func TestCTNormalize(t *testing.T) {
	x := []float32{-2000, -100, 0, 50, 3000}
	st := CTStats{Mean: 40, Std: 200, Lower: -1000, Upper: 1500}
	if err := CTNormalize(x, st); err != nil {
		t.Fatal(err)
	}
	testutil.CloseTo(t, "ct", x, []float64{(-1000 - 40) / 200.0, (-100 - 40) / 200.0, -40 / 200.0, 10 / 200.0, (1500 - 40) / 200.0}, 1e-6)
	if err := CTNormalize(x, CTStats{Lower: 5, Upper: 1}); err == nil {
		t.Fatal("lower > upper accepted")
	}
}

func TestComputeCTStats(t *testing.T) {
	v := make([]float32, 201)
	for i := range v {
		v[i] = float32(200 - i) // 0..200, unsorted
	}
	st, err := ComputeCTStats(v)
	if err != nil {
		t.Fatal(err)
	}
	// numpy: percentile(0..200, 0.5) = 1.0, percentile(.., 99.5) = 199.0
	if st.Mean != 100 || math.Abs(st.Lower-1) > 1e-9 || math.Abs(st.Upper-199) > 1e-9 {
		t.Fatalf("%+v", st)
	}
	if math.Abs(st.Std-math.Sqrt((201*201-1)/12.0)) > 1e-9 { // population variance of 0..200
		t.Fatalf("std %v", st.Std)
	}
	if v[0] != 200 {
		t.Fatal("input reordered")
	}
	if _, err := ComputeCTStats(nil); err == nil {
		t.Fatal("no voxels accepted")
	}
}
