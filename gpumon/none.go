//go:build !cuda

package gpumon

import "errors"

// openNVML in the default build: NVML needs cgo, which the pure-Go build
// leaves out.
func openNVML(int) (source, error) {
	return nil, errors.New("this build has no NVML (build with -tags cuda on a GPU node)")
}
