package infer

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/voxtrain/voxtrain/nifti"
)

// WriteLabels writes a label map on the grid of the reference image file.
func WriteLabels(output, reference string, labels []uint8) error {
	ref, err := nifti.ReadHeader(reference)
	if err != nil {
		return err
	}
	h := *ref
	h.Extensions = nil
	h.Datatype = nifti.Uint8
	h.Bitpix = 8
	h.SclSlope, h.SclInter = 0, 0
	h.CalMin, h.CalMax = 0, 0
	h.IntentCode, h.IntentName = 1002, "" // NIFTI_INTENT_LABEL
	h.Descrip = "voxtrain prediction"
	if h.Dim[0] > 3 {
		h.Dim[0] = 3 // drop a channel axis
		for i := 4; i < 8; i++ {
			h.Dim[i] = 1
		}
	}
	if n := h.NumVoxels(); n != int64(len(labels)) {
		return fmt.Errorf("write %s: %d labels for the %d voxels of %s", output, len(labels), n, reference)
	}
	vals := make([]float32, len(labels))
	for i, l := range labels {
		vals[i] = float32(l)
	}
	if dir := filepath.Dir(output); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("write %s: %w", output, err)
		}
	}
	return nifti.WriteFloat32(output, &h, vals)
}
