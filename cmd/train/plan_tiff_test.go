package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestPlanTIFFSpacingFiles: an nnU-Net dataset of .tif files keeps its
// spacing where nnU-Net's Tiff3DIO does, in CASE.json beside the images
// and labels; train plan fingerprints those spacings, not the TIFFs' own
// metadata (the fixture's 1×1×1).
func TestPlanTIFFSpacingFiles(t *testing.T) {
	b, err := os.ReadFile("../../tiff/testdata/labels_uint8.tif")
	if err != nil {
		t.Fatal(err)
	}
	ds := t.TempDir()
	spacings := [][3]float64{{3, 0.5, 0.25}, {2, 0.5, 0.25}}
	for _, sub := range []string{"imagesTr", "labelsTr"} {
		if err := os.MkdirAll(filepath.Join(ds, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i, sp := range spacings {
		side := fmt.Sprintf(`{"spacing": [%v, %v, %v]}`, sp[0], sp[1], sp[2])
		for name, data := range map[string][]byte{
			fmt.Sprintf("imagesTr/c%d_0000.tif", i): b, fmt.Sprintf("labelsTr/c%d.tif", i): b,
			fmt.Sprintf("imagesTr/c%d.json", i): []byte(side), fmt.Sprintf("labelsTr/c%d.json", i): []byte(side),
		} {
			if err := os.WriteFile(filepath.Join(ds, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	js := `{"channel_names":{"0":"EM"},"labels":{"background":0,"a":1,"b":2},"numTraining":2,"file_ending":".tif"}`
	if err := os.WriteFile(filepath.Join(ds, "dataset.json"), []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	f, _, _ := testFactory()
	out := filepath.Join(t.TempDir(), "plans")
	cmd := NewCmdPlan(f, nil)
	cmd.SetArgs([]string{ds, "-o", out, "--workers", "1"})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(out, "dataset_fingerprint.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fp struct {
		Spacings [][]float64 `json:"spacings"`
	}
	if err := json.Unmarshal(raw, &fp); err != nil {
		t.Fatal(err)
	}
	if len(fp.Spacings) != 2 || !slices.Equal(fp.Spacings[0], spacings[0][:]) || !slices.Equal(fp.Spacings[1], spacings[1][:]) {
		t.Errorf("fingerprint spacings %v, want the spacing files' %v", fp.Spacings, spacings)
	}
}
