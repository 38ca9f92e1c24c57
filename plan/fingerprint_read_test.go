package plan

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/data"
)

// TestReadFingerprint reads nnU-Net's fingerprint of the demo as the
// planner's tests decode it, and refuses inconsistent ones naming the key.
func TestReadFingerprint(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "nnunet_dataset_fingerprint.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := ReadFingerprint(f)
	if err != nil {
		t.Fatal(err)
	}
	var want Fingerprint
	readJSON(t, filepath.Join("testdata", "nnunet_dataset_fingerprint.json"), &want)
	if !reflect.DeepEqual(*got, want) {
		t.Error("ReadFingerprint differs from the JSON decoded directly")
	}
	const stats = `"foreground_intensity_properties_per_channel": {"0": {"mean": 1}}`
	for _, tc := range []struct{ json, want string }{
		{`{"spacings": [[1, 1, 1]], "shapes_after_crop": [[2, 2, 2]], ` + stats + `}`, ""},
		{`[1, 2]`, "not a dataset fingerprint"},
		{`{` + stats + `}`, "no spacings"},
		{`{"spacings": [[1, 1, 1]], "shapes_after_crop": [], ` + stats + `}`, "1 spacings but 0 shapes_after_crop"},
		{`{"spacings": [[1, 1, 1]], "shapes_after_crop": [[2, 2, 2]], "case_ids": ["a", "b"], ` + stats + `}`, "1 spacings but 2 case_ids"},
		{`{"spacings": [[1, 1, 1]], "shapes_after_crop": [[2, 2, 2]]}`, "no foreground_intensity_properties_per_channel"},
		{`{"spacings": [[1, 1, 1]], "shapes_after_crop": [[2, 2, 2]], "foreground_intensity_properties_per_channel": {"1": {}}}`, "has no channel 0"},
		{`{"spacings": [[1, 0, 1]], "shapes_after_crop": [[2, 2, 2]], ` + stats + `}`, "case 0: spacing [1 0 1]"},
		{`{"spacings": [[1, 1, 1]], "shapes_after_crop": [[2, 0, 2]], ` + stats + `}`, "shape after crop [2 0 2]"},
	} {
		_, err := ReadFingerprint(strings.NewReader(tc.json))
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: error %v, want %q", tc.json, err, tc.want)
		}
	}

	ds := &data.Dataset{Root: "ds", Channels: 2, Cases: []data.Case{{ID: "a"}, {ID: "b"}}}
	two := &Fingerprint{Spacings: make([][3]float64, 2), ForegroundIntensityPropertiesPerChannel: map[string]IntensityStats{"0": {}, "1": {}}}
	if err := two.CheckAgainst(ds); err != nil {
		t.Errorf("a fingerprint without case IDs: %v", err)
	}
	two.CaseIDs = []string{"a", "c"}
	if err := two.CheckAgainst(ds); err == nil || !strings.Contains(err.Error(), `case 1 is "c", the dataset ds's is "b"`) {
		t.Errorf("other case IDs: %v", err)
	}
	one := &Fingerprint{Spacings: make([][3]float64, 2), ForegroundIntensityPropertiesPerChannel: map[string]IntensityStats{"0": {}}}
	if err := one.CheckAgainst(ds); err == nil || !strings.Contains(err.Error(), "1 channels, the dataset ds has 2") {
		t.Errorf("other channel count: %v", err)
	}
}
