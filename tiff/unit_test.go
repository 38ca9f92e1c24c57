package tiff

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/volume"
)

// onePage is a classic little-endian TIFF of one 3×2 uint8 page whose
// ImageDescription is desc.
func onePage(desc string) []byte {
	const w, h = 3, 2
	type entry struct {
		tag, typ uint16
		val      uint32
	}
	d := append([]byte(desc), 0)
	const n = 10
	descAt := uint32(8 + 2 + n*12 + 4)
	pixAt := descAt + uint32(len(d))
	entries := []entry{
		{256, 4, w}, {257, 4, h}, {258, 3, 8}, {259, 3, 1}, {262, 3, 1},
		{270, 2, descAt}, {273, 4, pixAt}, {277, 3, 1}, {278, 4, h}, {279, 4, w * h},
	}
	le := binary.LittleEndian
	b := []byte{'I', 'I', 42, 0, 8, 0, 0, 0}
	b = le.AppendUint16(b, n)
	for _, e := range entries {
		b = le.AppendUint16(b, e.tag)
		b = le.AppendUint16(b, e.typ)
		count := uint32(1)
		if e.tag == 270 {
			count = uint32(len(d))
		}
		b = le.AppendUint32(b, count)
		b = le.AppendUint32(b, e.val)
	}
	b = le.AppendUint32(b, 0)
	b = append(b, d...)
	return append(b, 1, 2, 3, 4, 5, 6)
}

// TestUnitFixtures: tifffile's ImageJ stacks say unit=um; its OME-TIFF
// gives PhysicalSizes without a unit, which the OME schema puts in µm; a
// plain TIFF says nothing.
func TestUnitFixtures(t *testing.T) {
	for f, want := range map[string]string{
		"imagej_uint16.tif":          "micrometer",
		"imagej_2channels_uint8.tif": "micrometer",
		"ome_float32.ome.tif":        "micrometer",
		"stack_uint16.tif":           "",
		"slices_imagej_float32":      "micrometer",
	} {
		v, err := volume.Open(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		if u := v.Header().Unit; u != want {
			t.Errorf("%s: unit %q, want %q", f, u, want)
		}
		v.Close()
	}
}

// TestUnitDescriptions: ImageJ's unit= ("micron", its \u00B5m escape,
// "pixel" for none; yunit=/zunit= where they differ) and OME's
// PhysicalSizeXUnit, … (XML-escaped µ, Å) give the unit; axes that
// disagree are an error naming the file and the keys.
func TestUnitDescriptions(t *testing.T) {
	dir := t.TempDir()
	ome := func(attrs string) string {
		return `<?xml version="1.0"?><OME><Image><Pixels DimensionOrder="XYZCT" Type="uint8" SizeX="3" SizeY="2" SizeZ="1" SizeC="1" SizeT="1" ` + attrs + `/></Image></OME>`
	}
	for i, tc := range []struct{ desc, want, err string }{
		{"ImageJ=1.54f\nimages=1\nunit=micron\n", "micrometer", ""},
		{"ImageJ=1.54f\nimages=1\nunit=\\u00B5m\n", "micrometer", ""},
		{"ImageJ=1.54f\nimages=1\nunit=nm\nspacing=40\n", "nanometer", ""},
		{"ImageJ=1.54f\nimages=1\nunit=pixel\n", "", ""},
		{"ImageJ=1.54f\nimages=1\nunit=nm\nzunit=nm\n", "nanometer", ""},
		{"ImageJ=1.54f\nimages=1\nunit=nm\nzunit=micron\n", "", `zunit is in "micron", unit in "nm"`},
		// An uncalibrated axis beside calibrated ones: its spacing is in
		// pixels, not the others' unit.
		{"ImageJ=1.54f\nimages=1\nunit=nm\nzunit=pixel\n", "", `zunit is in "pixel", unit in "nm"`},
		{"ImageJ=1.54f\nimages=1\nzunit=nm\nspacing=40\n", "", `zunit is in "nm", unit in ""`},
		{ome(`PhysicalSizeX="4" PhysicalSizeXUnit="nm" PhysicalSizeY="4" PhysicalSizeYUnit="nm"`), "nanometer", ""},
		{ome(`PhysicalSizeX="0.5" PhysicalSizeXUnit="&#181;m" PhysicalSizeY="0.5" PhysicalSizeZ="2" PhysicalSizeZUnit="µm"`), "micrometer", ""},
		{ome(`PhysicalSizeX="40" PhysicalSizeXUnit="Å" PhysicalSizeY="40" PhysicalSizeYUnit="Å"`), "angstrom", ""},
		{ome(`SignificantBits="8"`), "", ""},
		{ome(`PhysicalSizeX="4" PhysicalSizeXUnit="nm" PhysicalSizeY="0.004"`), "", `PhysicalSizeYUnit is in "µm", PhysicalSizeXUnit in "nm"`},
		{ome(`PhysicalSizeX="4" PhysicalSizeXUnit="nm" PhysicalSizeY="4" PhysicalSizeYUnit="pixel"`), "", `PhysicalSizeYUnit is in "pixel", PhysicalSizeXUnit in "nm"`},
	} {
		p := filepath.Join(dir, "u"+string(rune('a'+i))+".tif")
		if err := os.WriteFile(p, onePage(tc.desc), 0o644); err != nil {
			t.Fatal(err)
		}
		v, err := volume.Open(p)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want an error naming %s and %s", tc.desc, err, p, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.desc, err)
		}
		if u := v.Header().Unit; u != tc.want {
			t.Errorf("%q: unit %q, want %q", tc.desc, u, tc.want)
		}
		v.Close()
	}
}

// TestUnitFolder: a folder's unit is its slices'; a slice in another
// unit than the first is an error naming both.
func TestUnitFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, unit string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, onePage("ImageJ=1.54f\nimages=1\nunit="+unit+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	first := write("s0.tif", "nm")
	write("s1.tif", "nm")
	v, err := volume.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if u := v.Header().Unit; u != "nanometer" {
		t.Errorf("unit %q, want nanometer", u)
	}
	v.Close()
	odd := write("s2.tif", "micron")
	_, err = volume.Open(dir)
	if err == nil || !strings.Contains(err.Error(), odd) || !strings.Contains(err.Error(), first) || !strings.Contains(err.Error(), "micrometer") {
		t.Errorf("a slice in micrometres: %v, want an error naming %s and %s", err, odd, first)
	}
}
