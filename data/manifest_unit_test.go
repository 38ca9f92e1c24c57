package data

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
)

// inUnit writes crop c's label in unit, its spacing and origin (c's, in
// nanometres) divided by nmPer, the nanometres in one unit.
func inUnit(t *testing.T, dir string, c resCrop, file, unit string, nmPer float64, value func(z, y, x int) float32) {
	t.Helper()
	var sp, o [3]float64
	for a := range 3 {
		sp[a], o[a] = c.spacing[a]/nmPer, c.origin[a]/nmPer
	}
	writeGridUnit(t, filepath.Join(dir, file), c.shape, sp, o, unit, true, value)
}

// unitCrops are resCrops placed every way a crop in another unit can
// be: by its own origin and by translation, on a level of the raw group
// (at its spacing) and resampled, and on a raw array.
var unitCrops = []resCrop{resCrops[0], resCrops[1], resCrops[2], resCrops[3], resCrops[4]}

const unitManifest = `classes: {background: 0, a: 1, b: 2}
volumes:
  - raw: raw.zarr
    crops:
      - {id: at8, label: DIR/at8.zarr}
      - {id: at16, label: DIR/at16.zarr, translation: [36, 52, 20]}
      - {id: at4, label: DIR/at4.zarr}
      - {id: aniso, label: DIR/aniso.zarr, translation: [80, 162, 14]}
  - raw: raw.zarr/s0
    crops:
      - {id: coarse, label: DIR/coarse.zarr}
`

// TestManifestUnits: label crops written in micrometres, on a raw in
// nanometres, are placed by their origin or by translation (in the raw's
// nanometres) on the same raw voxels, levels and labels as the same crops
// written in nanometres: the cases' images (their boxes) and labels are
// identical, and both are what expectPlacement computes in nanometres.
// A resampled crop's path names the raw's unit only where the label's
// differs; Verify compares the µm label on the raw's level in nm.
func TestManifestUnits(t *testing.T) {
	dir, levels := resFixture(t, nil)
	for _, c := range unitCrops {
		inUnit(t, dir, c, "um/"+c.id+".zarr", "micrometer", 1000, resClass)
		inUnit(t, dir, c, "nm/"+c.id+".zarr", "nanometer", 1, resClass)
	}
	open := func(sub string) (config.Data, *Dataset) {
		t.Helper()
		p := filepath.Join(dir, sub+".yaml")
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(unitManifest, "DIR", sub)), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := filled(config.Data{Manifest: p, Fold: -1, Workers: workers(1), Normalization: config.StringList{"none"}})
		ds, err := OpenDataset(cfg)
		if err != nil {
			t.Fatalf("%s: %v", sub, err)
		}
		return cfg, ds
	}
	umCfg, um := open("um")
	nmCfg, nm := open("nm")
	for k, c := range unitCrops {
		a, b := um.Cases[k], nm.Cases[k]
		if a.Images[0] != b.Images[0] || a.Weight != b.Weight {
			t.Errorf("crop %s: µm case image %s weight %g, nm case %s %g", c.id, a.Images[0], a.Weight, b.Images[0], b.Weight)
		}
		va, err := ReadCase(umCfg, a, 1)
		if err != nil {
			t.Fatalf("crop %s in µm: %v", c.id, err)
		}
		vb, err := ReadCase(nmCfg, b, 1)
		if err != nil {
			t.Fatal(err)
		}
		if string(va.Label) != string(vb.Label) {
			t.Errorf("crop %s: the µm crop's labels differ from the nm crop's", c.id)
		}
		resampled := strings.Contains(a.Label, "#resample=")
		if resampled != strings.Contains(b.Label, "#resample=") || resampled != strings.Contains(a.Label, "&unit=nanometer") || strings.Contains(b.Label, "&unit=") {
			t.Errorf("crop %s: labels %s and %s: want both resampled or neither, the µm one's naming nanometer", c.id, a.Label, b.Label)
		}
	}
	// Against the placement computed in nanometres (crops on s0, s1, s0,
	// s0 and the array s0).
	for _, sub := range []string{"um", "nm"} {
		var crops []resCrop
		for _, c := range unitCrops {
			c.file = sub + "/" + c.id + ".zarr"
			crops = append(crops, c)
		}
		cfg := umCfg
		if sub == "nm" {
			cfg = nmCfg
		}
		checkResCases(t, cfg, dir, levels, crops, []int{0, 1, 0, 0, 0},
			[]string{"raw.zarr", "raw.zarr/s1", "raw.zarr", "raw.zarr", "raw.zarr/s0"})
	}
	if err := Verify(context.Background(), umCfg, VerifyOptions{NumClasses: 3, Patch: [3]int{4, 4, 4}, Logger: discard()}); err != nil {
		t.Fatalf("Verify of the µm crops: %v", err)
	}
}

// TestManifestUnitMask: a resampled crop in micrometres whose mask is in
// nanometres (and one in millimetres) is masked where the same crop in
// nanometres would be.
func TestManifestUnitMask(t *testing.T) {
	const ignore = 200
	c := resCrops[2] // at 4 nm, resampled onto s0
	dir, levels := resFixture(t, nil)
	keep := func(z, y, x int) float32 { return map[bool]float32{true: 1}[x >= 4] }
	inUnit(t, dir, c, "crops/at4.zarr", "micrometer", 1000, resClass)
	inUnit(t, dir, c, "crops/mask.zarr", "nanometer", 1, keep)
	inUnit(t, dir, c, "crops/mask_mm.zarr", "mm", 1e6, keep)
	masked := func(z, y, x int) float32 {
		if keep(z, y, x) == 0 {
			return ignore
		}
		return resClass(z, y, x)
	}
	_, want := expectPlacement(c, levels[0].spacing, levels[0].origin, levels[0].shape, masked)
	for _, mask := range []string{"crops/mask.zarr", "crops/mask_mm.zarr"} {
		p := filepath.Join(dir, "manifest.yaml")
		m := "volumes:\n  - raw: raw.zarr\n    crops:\n      - {id: at4, label: crops/at4.zarr, mask: " + mask + "}\n"
		if err := os.WriteFile(p, []byte(m), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := filled(config.Data{Manifest: p, Fold: -1, Workers: workers(1), Normalization: config.StringList{"none"}, IgnoreLabel: ignore})
		ds, err := OpenDataset(cfg)
		if err != nil {
			t.Fatalf("mask %s: %v", mask, err)
		}
		v, err := ReadCase(cfg, ds.Cases[0], 1)
		if err != nil {
			t.Fatal(err)
		}
		if string(v.Label) != string(want) {
			t.Errorf("mask %s: the masked labels differ from the crop's in nanometres", mask)
		}
	}
}

// TestManifestUnitErrors: a unit that is not a length — the raw's, a
// label's, a mask's — is an error naming the manifest, the file and the
// unit; a label in a unit that puts it far outside the raw is refused
// with both spacings and their units in the message.
func TestManifestUnitErrors(t *testing.T) {
	dir, _ := resFixture(t, nil)
	c := resCrops[0]
	inUnit(t, dir, c, "crops/ok.zarr", "micrometer", 1000, resClass)
	inUnit(t, dir, c, "crops/time.zarr", "second", 1, resClass)
	inUnit(t, dir, c, "crops/mask.zarr", "furlong", 1, resClass)
	inUnit(t, dir, c, "crops/mm.zarr", "millimeter", 1000, resClass)
	writeGridUnit(t, filepath.Join(dir, "odd.zarr"), [3]int{24, 32, 32}, [3]float64{8, 8, 8}, [3]float64{}, "parsecs per second", false, resClass)
	for _, tc := range []struct {
		manifest string
		want     []string
	}{
		{"volumes:\n  - raw: raw.zarr\n    crops:\n      - label: crops/time.zarr\n",
			[]string{"crops[0] (time): label " + filepath.Join(dir, "crops/time.zarr"), `"second" is not a length unit`}},
		{"volumes:\n  - raw: odd.zarr\n    crops:\n      - label: crops/ok.zarr\n",
			[]string{"volumes[0].raw " + filepath.Join(dir, "odd.zarr"), `"parsecs per second" is not a length unit`}},
		{"volumes:\n  - raw: raw.zarr\n    crops:\n      - {label: crops/ok.zarr, mask: crops/mask.zarr}\n",
			[]string{"crops[0] (ok): mask " + filepath.Join(dir, "crops/mask.zarr"), `"furlong" is not a length unit`}},
		{"volumes:\n  - raw: raw.zarr\n    crops:\n      - label: crops/mm.zarr\n",
			[]string{"crops[0] (mm)", "is not inside the raw", "[0.008 0.008 0.008] millimeter = [8000 8000 8000] nanometer", "spacing [8 8 8] nanometer"}},
	} {
		p := filepath.Join(dir, "bad.yaml")
		if err := os.WriteFile(p, []byte(tc.manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := OpenDataset(filled(config.Data{Manifest: p, IgnoreLabel: 255}))
		if err == nil || !strings.Contains(err.Error(), "data.manifest "+p) {
			t.Errorf("%q: error %v, want one naming %s", tc.manifest, err, p)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q:\nerror %v\nwant one naming %q", tc.manifest, err, w)
			}
		}
	}
}
