package plan

import (
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/data"
)

// TestDescribeDatasetUndeclaredLabel: a label value the training labels
// hold but dataset.json does not name is refused, naming it and the
// labels that are named; the ignore label and background are not
// undeclared; without dataset.json labels nothing is checked.
func TestDescribeDatasetUndeclaredLabel(t *testing.T) {
	fp := &Fingerprint{ClassFrequencies: map[string]float64{"0": 0.9, "1": 0.06, "2": 0.04}}
	ds := &data.Dataset{Root: "/d", LabelNames: map[int]string{0: "background", 1: "anterior"}, Cases: make([]data.Case, 2)}
	if _, err := DescribeDataset(ds, fp, 0); err == nil || !strings.Contains(err.Error(), "label values [2]") || !strings.Contains(err.Error(), "they name [0 1]") {
		t.Errorf("undeclared label 2: %v", err)
	}
	ds.IgnoreLabel = 2
	if d, err := DescribeDataset(ds, fp, 0); err != nil || d.IgnoreLabel != 2 || d.Outputs != 2 {
		t.Errorf("label 2 as the ignore label: %+v, %v", d, err)
	}
	ds.IgnoreLabel, ds.LabelNames = 0, nil
	if d, err := DescribeDataset(ds, fp, 0); err != nil || d.NumClasses != 3 {
		t.Errorf("no dataset.json labels: %+v, %v", d, err)
	}
}
