// Command zarrread reads the patch list of scripts/bench_zarr/bench.py
// from the benchmark's OME-Zarr store through package zarr, on a number
// of threads, and prints the same JSON as bench.py's readers: the Go side
// of the side-by-side run in docs/BENCHMARKS.md.
//
//	go run ./scripts/bench_zarr/zarrread -dir DIR -threads 2 [-cache-bytes N]
//
// Each patch is read as float32 (what the training pipeline consumes).
// -cache-bytes -1 (the default) reads through no chunk cache, as the
// Python readers do; a positive value shares one zarr.Cache of that size.
package main

import (
	"flag"
	"fmt"
	"path/filepath"

	"github.com/voxtrain/voxtrain/scripts/internal/patchbench"
	"github.com/voxtrain/voxtrain/zarr"
)

func main() {
	o := patchbench.Flags()
	cacheBytes := flag.Int64("cache-bytes", -1, "the shared chunk cache's bound (-1: none)")
	patchbench.Main("zarrread", o, func() error {
		opt := zarr.Options{CacheBytes: -1}
		reader := "go zarr"
		if *cacheBytes >= 0 {
			opt.Cache = zarr.NewCache(*cacheBytes)
			reader = fmt.Sprintf("go zarr, %d MiB cache", *cacheBytes>>20)
		}
		f, err := zarr.OpenWith(filepath.Join(o.Dir, "bench.ome.zarr"), opt)
		if err != nil {
			return err
		}
		defer f.Close()
		return patchbench.Run(o, reader, f)
	})
}
