//go:build !unix

package databench

import "time"

// cpuTime is not measured on this platform (reported as 0).
func cpuTime() time.Duration { return 0 }
