package trainer

import (
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/nn"
)

// smallMemoryDevice is the CPU device on a machine with little memory.
type smallMemoryDevice struct {
	*cpu.Device
	avail int64
}

func (d smallMemoryDevice) MemoryAvailable() (int64, bool) { return d.avail, true }

// TestCheckMemoryRefusesAWorkspaceTooBig: a batch and patch whose
// workspace exceeds the device's memory are refused naming both keys and
// both sizes (before: the allocation crashed the process with the
// runtime's out-of-memory error); one that fits passes.
func TestCheckMemoryRefusesAWorkspaceTooBig(t *testing.T) {
	dev := smallMemoryDevice{Device: cpu.New(cpu.Options{}), avail: 64 << 20}
	m, err := nn.NewUNet(dev, config.Model{InChannels: 1, NumClasses: 3, Features: []int{4, 8}, ConvsPerLevel: 2,
		Norm: "instance", NormEps: 1e-5, Nonlinearity: "leaky_relu", NegativeSlope: 0.01}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	if err := checkMemory(dev, m, 2, [3]int{16, 16, 16}); err != nil {
		t.Fatalf("a small patch: %v", err)
	}
	err = checkMemory(dev, m, 4, [3]int{128, 128, 128})
	if err == nil {
		t.Fatal("a 128³ batch of 4 passed with 64 MiB")
	}
	for _, want := range []string{"train.patch_size [128 128 128]", "train.batch_size 4", "GiB", "has 64.0 MiB available"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q: %v", want, err)
		}
	}
}
