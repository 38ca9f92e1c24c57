// Command train trains 3D U-Nets on NIfTI volumes with a data pipeline that
// keeps the GPU fed. See the README for the commands.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "train:", err)
		os.Exit(1)
	}
}
