package nrrd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnit: "space units" (as Slicer and ITK write it) or the spatial
// axes' "units" give the header's unit, normalised; a channel axis's unit
// is not looked at; "???" is no unit; spatial units that disagree are an
// error naming the file, the field and the two axes (volume.AxesUnit).
func TestUnit(t *testing.T) {
	const ascii = "encoding: ascii\n\n1 2 3 4 5 6 7 8\n"
	dir := t.TempDir()
	for i, tc := range []struct {
		header, want, err string
	}{
		{"type: uint8\ndimension: 3\nsizes: 2 2 2\nspace: left-posterior-superior\nspace directions: (0.5,0,0) (0,0.5,0) (0,0,2)\nspace units: \"mm\" \"mm\" \"mm\"\n", "millimeter", ""},
		{"type: uint8\ndimension: 3\nsizes: 2 2 2\nspacings: 4 4 40\nunits: \"nm\" \"nm\" \"nm\"\n", "nanometer", ""},
		{"type: uint8\ndimension: 4\nsizes: 1 2 2 2\nkinds: vector domain domain domain\nspacings: NaN 0.5 0.5 0.5\nunits: \"\" \"microns\" \"µm\" \"um\"\n", "micrometer", ""},
		{"type: uint8\ndimension: 3\nsizes: 2 2 2\nspace: RAS\nspace directions: (1,0,0) (0,1,0) (0,0,1)\nspace units: \"???\" \"???\" \"???\"\n", "", ""},
		{"type: uint8\ndimension: 3\nsizes: 2 2 2\nspacings: 1 1 1\n", "", ""},
		{"type: uint8\ndimension: 3\nsizes: 2 2 2\nspace: RAS\nspace directions: (1,0,0) (0,1,0) (0,0,1)\nspace units: \"mm\" \"mm\" \"um\"\n", "", `field "space units": "\"mm\" \"mm\" \"um\"": the spatial axes disagree on their unit: world axis 0 is in "mm", world axis 2 in "um"`},
		{"type: uint8\ndimension: 3\nsizes: 2 2 2\nspacings: 1 1 1\nunits: \"nm\" \"\" \"nm\"\n", "", `field "units": "\"nm\" \"\" \"nm\"": the spatial axes disagree on their unit: axis 0 is in "nm", axis 1 in ""`},
		// "???" is no unit, which beside "nm" is an error; the channel
		// axis's "" is not looked at.
		{"type: uint8\ndimension: 4\nsizes: 2 2 2 1\nkinds: domain domain domain vector\nspacings: 1 1 1 NaN\nunits: \"nm\" \"nm\" \"???\" \"\"\n", "", `field "units": "\"nm\" \"nm\" \"???\" \"\"": the spatial axes disagree on their unit: axis 0 is in "nm", axis 2 in ""`},
	} {
		p := filepath.Join(dir, "u"+string(rune('0'+i))+".nrrd")
		if err := os.WriteFile(p, []byte("NRRD0004\n"+tc.header+ascii), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := Open(p)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "disagree") {
				t.Errorf("%q: %v, want an error naming %s and %s", tc.header, err, p, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.header, err)
		}
		if u := f.Header().Unit; u != tc.want {
			t.Errorf("%q: unit %q, want %q", tc.header, u, tc.want)
		}
		f.Close()
	}
}
