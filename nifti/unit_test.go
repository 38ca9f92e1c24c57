package nifti

import (
	"path/filepath"
	"testing"

	"github.com/voxtrain/voxtrain/volume"
)

// TestVolumeUnit: xyzt_units' spatial code becomes the volume header's
// unit (the time code beside it does not matter); 0 is no unit. The
// fixtures written by ITK and dcm2niix say millimetres.
func TestVolumeUnit(t *testing.T) {
	for _, f := range []string{"real/itk_ct.nii.gz", "real/dcm2niix_ct.nii"} {
		v, err := volume.Open(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		if u := v.Header().Unit; u != "millimeter" {
			t.Errorf("%s: unit %q, want millimeter", f, u)
		}
		v.Close()
	}
	dir := t.TempDir()
	for code, want := range map[uint8]string{
		UnitsMM | UnitsSec: "millimeter", UnitsMicron: "micrometer", UnitsMeter | UnitsMsec: "meter",
		0: "", UnitsSec: "", 4: "", // 4..7: no spatial unit the standard defines
	} {
		h, err := NewHeader([]int{2, 3, 4}, Float32)
		if err != nil {
			t.Fatal(err)
		}
		h.XYZTUnits = code
		h.Pixdim[1], h.Pixdim[2], h.Pixdim[3] = 0.5, 0.5, 2
		p := filepath.Join(dir, "u.nii")
		if err := WriteFloat32(p, h, make([]float32, 24)); err != nil {
			t.Fatal(err)
		}
		v, err := volume.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		if hd := v.Header(); hd.Unit != want || hd.Spacing != [3]float64{2, 0.5, 0.5} {
			t.Errorf("xyzt_units %d: unit %q spacing %v, want %q and [2 0.5 0.5] (not converted)", code, hd.Unit, hd.Spacing, want)
		}
		v.Close()
		var r Reader
		info, _, err := r.Inspect(p)
		if err != nil || info.Unit != want {
			t.Errorf("xyzt_units %d: Inspect's unit %q (%v), want %q", code, info.Unit, err, want)
		}
	}
}

// TestSpatialUnitCodes: every spatial code of xyzt_units (its low three
// bits, the time bits beside them ignored) gives SpaceUnits' short name
// and SpatialUnit's UDUNITS-2 name, the two from one mapping.
func TestSpatialUnitCodes(t *testing.T) {
	want := map[uint8][2]string{
		0: {"unknown", ""}, UnitsMeter: {"m", "meter"}, UnitsMM: {"mm", "millimeter"}, UnitsMicron: {"um", "micrometer"},
		4: {"unknown", ""}, 5: {"unknown", ""}, 6: {"unknown", ""}, 7: {"unknown", ""},
	}
	for code := range uint8(8) {
		for _, tbits := range []uint8{0, UnitsSec, UnitsUsec} {
			h := Header{XYZTUnits: code | tbits}
			if got := [2]string{h.SpaceUnits(), h.SpatialUnit()}; got != want[code] {
				t.Errorf("xyzt_units %d: SpaceUnits, SpatialUnit = %q, want %q", code|tbits, got, want[code])
			}
		}
	}
}
