//go:build cuda

package gpumon

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

type nvmlSource struct{ dev nvml.Device }

// openNVML loads libnvidia-ml at run time (go-nvml dlopens it) and opens the
// device. Without the driver it returns NVML's own reason, e.g. "Driver Not
// Loaded" or a failure to find the library.
func openNVML(index int) (source, error) {
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML: %s", nvml.ErrorString(ret))
	}
	dev, ret := nvml.DeviceGetHandleByIndex(index)
	if ret != nvml.SUCCESS {
		nvml.Shutdown()
		return nil, fmt.Errorf("NVML: device %d: %s", index, nvml.ErrorString(ret))
	}
	return &nvmlSource{dev: dev}, nil
}

func (s *nvmlSource) read() (Sample, error) {
	var out Sample
	util, ret := s.dev.GetUtilizationRates()
	if ret != nvml.SUCCESS {
		return out, fmt.Errorf("NVML utilisation: %s", nvml.ErrorString(ret))
	}
	out.UtilPct = float64(util.Gpu)
	if mem, ret := s.dev.GetMemoryInfo(); ret == nvml.SUCCESS {
		out.MemUsedMiB = float64(mem.Used) / (1 << 20)
		out.MemTotalMiB = float64(mem.Total) / (1 << 20)
	}
	if mw, ret := s.dev.GetPowerUsage(); ret == nvml.SUCCESS {
		out.PowerW = float64(mw) / 1000
	}
	if t, ret := s.dev.GetTemperature(nvml.TEMPERATURE_GPU); ret == nvml.SUCCESS {
		out.TempC = float64(t)
	}
	return out, nil
}

func (s *nvmlSource) close() { nvml.Shutdown() }
