package nifti

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

type expectedFile struct {
	File         string              `json:"file"`
	NiftiVersion int                 `json:"nifti_version"`
	Dim          [8]int64            `json:"dim"`
	Pixdim       [8]*float64         `json:"pixdim"`
	Datatype     int16               `json:"datatype"`
	Bitpix       int16               `json:"bitpix"`
	VoxOffset    int64               `json:"vox_offset"`
	SclSlope     *float64            `json:"scl_slope"`
	SclInter     *float64            `json:"scl_inter"`
	QformCode    int32               `json:"qform_code"`
	SformCode    int32               `json:"sform_code"`
	Qform        *[4][4]float64      `json:"qform"`
	Sform        [4][4]float64       `json:"sform"`
	Affine       [4][4]float64       `json:"affine"`
	Shape        []int               `json:"shape"`
	RawSHA256    string              `json:"raw_sha256"`
	Stats        map[string]*float64 `json:"stats"`
}

func loadExpected(t *testing.T) []expectedFile {
	t.Helper()
	b, err := os.ReadFile("testdata/expected.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Files []expectedFile `json:"files"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Files) < 50 {
		t.Fatalf("expected.json lists %d files, want the full fixture set", len(doc.Files))
	}
	return doc.Files
}

// sameFloat compares a value read by voxtrain with nibabel's (nil = NaN/Inf).
func sameFloat(got float64, want *float64, tol float64) bool {
	if want == nil {
		return math.IsNaN(got) || math.IsInf(got, 0)
	}
	return math.Abs(got-*want) <= tol*math.Max(1, math.Abs(*want))
}

// TestConformanceWithNibabel reads every fixture written by nibabel and by
// other tools and checks every key of `train info --json` against what
// nibabel read from the same file.
func TestConformanceWithNibabel(t *testing.T) {
	var r Reader
	for _, want := range loadExpected(t) {
		t.Run(want.File, func(t *testing.T) {
			got, _, err := r.Inspect(filepath.Join("testdata", want.File))
			if err != nil {
				t.Fatal(err)
			}
			if got.NiftiVersion != want.NiftiVersion {
				t.Errorf("nifti_version = %d, want %d", got.NiftiVersion, want.NiftiVersion)
			}
			if got.Dim != want.Dim {
				t.Errorf("dim = %v, want %v", got.Dim, want.Dim)
			}
			for i := range want.Pixdim {
				if !sameFloat(float64(got.Pixdim[i]), want.Pixdim[i], 0) {
					t.Errorf("pixdim[%d] = %v, want %v", i, got.Pixdim[i], deref(want.Pixdim[i]))
				}
			}
			if got.Datatype != want.Datatype || got.Bitpix != want.Bitpix {
				t.Errorf("datatype/bitpix = %d/%d, want %d/%d", got.Datatype, got.Bitpix, want.Datatype, want.Bitpix)
			}
			if got.VoxOffset != want.VoxOffset {
				t.Errorf("vox_offset = %d, want %d", got.VoxOffset, want.VoxOffset)
			}
			if !sameFloat(float64(got.SclSlope), want.SclSlope, 0) || !sameFloat(float64(got.SclInter), want.SclInter, 0) {
				t.Errorf("scl_slope/inter = %v/%v, want %v/%v", got.SclSlope, got.SclInter, deref(want.SclSlope), deref(want.SclInter))
			}
			if got.QformCode != want.QformCode || got.SformCode != want.SformCode {
				t.Errorf("qform/sform code = %d/%d, want %d/%d", got.QformCode, got.SformCode, want.QformCode, want.SformCode)
			}
			if (got.Qform == nil) != (want.Qform == nil) {
				t.Errorf("qform present = %v, want %v", got.Qform != nil, want.Qform != nil)
			} else if want.Qform != nil {
				checkMatrix(t, "qform", *got.Qform, *want.Qform)
			}
			checkMatrix(t, "sform", got.Sform, want.Sform)
			if got.Affine == nil {
				t.Errorf("affine missing")
			} else {
				checkMatrix(t, "affine", *got.Affine, want.Affine)
			}
			if len(got.Shape) != len(want.Shape) {
				t.Errorf("shape = %v, want %v", got.Shape, want.Shape)
			} else {
				for i := range got.Shape {
					if got.Shape[i] != want.Shape[i] {
						t.Errorf("shape = %v, want %v", got.Shape, want.Shape)
						break
					}
				}
			}
			if got.RawSHA256 != want.RawSHA256 {
				t.Errorf("raw_sha256 = %s, want %s", got.RawSHA256, want.RawSHA256)
			}
			if want.Stats != nil {
				if got.Stats == nil {
					t.Fatalf("stats missing")
				}
				// numpy sums pairwise and voxtrain in blocks: the two float64
				// sums may differ by rounding, up to n ulps of the largest |value|
				// (large with int64 extremes that cancel).
				n := 1.0
				for _, s := range want.Shape {
					n *= float64(s)
				}
				big := 0.0
				if want.Stats["min"] != nil {
					big = math.Max(math.Abs(*want.Stats["min"]), math.Abs(*want.Stats["max"]))
				}
				sumTol := 1e-9 + n*big*0x1p-52
				for k, g := range map[string]Float{"min": got.Stats.Min, "max": got.Stats.Max, "mean": got.Stats.Mean, "sum": got.Stats.Sum} {
					tol := 0.0
					if k == "sum" {
						tol = sumTol
					} else if k == "mean" {
						tol = sumTol / n
					}
					if want.Stats[k] != nil && math.Abs(float64(g)-*want.Stats[k]) <= tol+1e-12*math.Abs(*want.Stats[k]) {
						continue
					}
					if !sameFloat(float64(g), want.Stats[k], 0) {
						t.Errorf("stats.%s = %v, want %v", k, g, deref(want.Stats[k]))
					}
				}
			}
		})
	}
}

func deref(p *float64) any {
	if p == nil {
		return "null"
	}
	return *p
}

func checkMatrix(t *testing.T, name string, got [4][4]Float, want [4][4]float64) {
	t.Helper()
	for i := 0; i < 4; i++ {
		for j := 0; j < 4; j++ {
			if math.Abs(float64(got[i][j])-want[i][j]) > 1e-6 {
				t.Errorf("%s[%d][%d] = %v, want %v", name, i, j, got[i][j], want[i][j])
			}
		}
	}
}

// TestFloat32MatchesNibabelStats checks the float32 decoding path (the one
// training uses) against nibabel's statistics of get_fdata on every scalar
// fixture: same voxel count and sums within float32 rounding.
func TestFloat32MatchesNibabelStats(t *testing.T) {
	for _, want := range loadExpected(t) {
		if want.Stats == nil {
			continue
		}
		t.Run(want.File, func(t *testing.T) {
			_, data, err := ReadFloat32(filepath.Join("testdata", want.File))
			if err != nil {
				t.Fatal(err)
			}
			n := 1
			for _, s := range want.Shape {
				n *= s
			}
			if len(data) != n {
				t.Fatalf("%d values, want %d", len(data), n)
			}
			lo, hi, sum := math.Inf(1), math.Inf(-1), 0.0
			for _, v := range data {
				f := float64(v)
				lo, hi, sum = math.Min(lo, f), math.Max(hi, f), sum+f
			}
			if want.Stats["min"] == nil {
				if !math.IsNaN(sum) {
					t.Fatalf("want NaN in the data, got sum %v", sum)
				}
				return
			}
			// float32 rounding of each value: relative 6e-8 of its magnitude.
			scale := math.Max(math.Abs(*want.Stats["min"]), math.Abs(*want.Stats["max"]))
			if math.Abs(lo-*want.Stats["min"]) > 1e-6*scale || math.Abs(hi-*want.Stats["max"]) > 1e-6*scale {
				t.Errorf("min/max = %v/%v, want %v/%v", lo, hi, *want.Stats["min"], *want.Stats["max"])
			}
			if math.Abs(sum-*want.Stats["sum"]) > 1e-6*scale*float64(n) {
				t.Errorf("sum = %v, want %v", sum, *want.Stats["sum"])
			}
		})
	}
}

// TestStoredQfacReported: a header whose pixdim[0] is 0 reads as qfac 1,
// as nibabel reads it, and info reports the stored 0 beside it.
func TestStoredQfacReported(t *testing.T) {
	var r Reader
	info, h, err := r.Inspect(filepath.Join("testdata", "synth", "qfac0.nii"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Pixdim[0] != 1 || h.Pixdim[0] != 1 || info.QfacStored != 0 {
		t.Errorf("pixdim[0] %v (header %v), qfac_stored %v; want 1, 1, 0", info.Pixdim[0], h.Pixdim[0], info.QfacStored)
	}
	info, _, err = r.Inspect(filepath.Join("testdata", "synth", "dt_int16_le.nii"))
	if err != nil {
		t.Fatal(err)
	}
	if info.QfacStored != info.Pixdim[0] {
		t.Errorf("a ±1 qfac: stored %v, applied %v", info.QfacStored, info.Pixdim[0])
	}
}
