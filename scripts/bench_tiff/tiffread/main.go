// Command tiffread reads the patch list of scripts/bench_tiff/bench.py
// from the benchmark's TIFF stack through package tiff (volume.Open and
// ReadRegion), on a number of threads, and prints the same JSON as
// bench.py's readers: the Go side of the side-by-side run in
// docs/BENCHMARKS.md.
//
//	go run ./scripts/bench_tiff/tiffread -dir DIR -file stack.tif -threads 2
//
// Each patch is read as float32 (what the training pipeline consumes),
// through one volume.File shared by the threads.
package main

import (
	"flag"
	"path/filepath"

	"github.com/voxtrain/voxtrain/scripts/internal/patchbench"
	"github.com/voxtrain/voxtrain/tiff"
)

func main() {
	o := patchbench.Flags()
	file := flag.String("file", "stack.tif", "the stack in DIR: stack.tif or stack_zstd.tif")
	patchbench.Main("tiffread", o, func() error {
		f, err := tiff.Open(filepath.Join(o.Dir, *file))
		if err != nil {
			return err
		}
		defer f.Close()
		return patchbench.Run(o, "go tiff "+*file, f)
	})
}
