package augment

import (
	"testing"

	"github.com/voxtrain/voxtrain/config"
)

func TestNewRejectsBadInput(t *testing.T) {
	c := mustPreset(t, config.PresetNNUNet)
	if _, err := New(c, [3]int{0, 8, 8}, 1); err == nil {
		t.Error("zero patch accepted")
	}
	if _, err := New(c, [3]int{8, 8, 8}, 0); err == nil {
		t.Error("zero channels accepted")
	}
	c.Gamma.P = -1
	if _, err := New(c, [3]int{8, 8, 8}, 1); err == nil {
		t.Error("bad config accepted")
	}
}
