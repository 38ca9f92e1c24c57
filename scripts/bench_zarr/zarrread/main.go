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
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/voxtrain/voxtrain/volume"
	"github.com/voxtrain/voxtrain/zarr"
)

const patch = 128

func main() {
	dir := flag.String("dir", "", "the folder bench.py make wrote")
	threads := flag.Int("threads", 2, "patches read at once (and GOMAXPROCS)")
	cacheBytes := flag.Int64("cache-bytes", -1, "the shared chunk cache's bound (-1: none)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile here")
	flag.Parse()
	if *cpuprofile != "" {
		pf, err := os.Create(*cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(pf)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "zarrread:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(*dir, *threads, *cacheBytes); err != nil {
		fmt.Fprintln(os.Stderr, "zarrread:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

func run(dir string, threads int, cacheBytes int64) error {
	runtime.GOMAXPROCS(threads)
	ps, err := readPatches(filepath.Join(dir, "patches.txt"))
	if err != nil {
		return err
	}
	opt := zarr.Options{CacheBytes: -1}
	if cacheBytes >= 0 {
		opt.Cache = zarr.NewCache(cacheBytes)
	}
	f, err := zarr.OpenWith(filepath.Join(dir, "bench.ome.zarr"), opt)
	if err != nil {
		return err
	}
	defer f.Close()
	check := make([]float64, len(ps))
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, threads)
	t0 := time.Now()
	for range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dst := [][]float32{make([]float32, patch*patch*patch)}
			for {
				i := int(next.Add(1)) - 1
				if i >= len(ps) {
					return
				}
				p := ps[i]
				box := volume.Box{Lo: p, Hi: [3]int{p[0] + patch, p[1] + patch, p[2] + patch}}
				if err := f.ReadRegion(box, dst); err != nil {
					errs <- err
					return
				}
				s := 0.0
				for z := 0; z < patch; z += 16 {
					for y := 0; y < patch; y += 16 {
						for x := 0; x < patch; x += 16 {
							s += float64(dst[0][(z*patch+y)*patch+x])
						}
					}
				}
				check[i] = s
			}
		}()
	}
	wg.Wait()
	dt := time.Since(t0).Seconds()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	sum := 0.0
	for _, s := range check {
		sum += s
	}
	reader := "go zarr"
	if cacheBytes >= 0 {
		reader = fmt.Sprintf("go zarr, %d MiB cache", cacheBytes>>20)
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"reader": reader, "threads": threads, "patches": len(ps),
		"seconds": round(dt), "samples_per_s": round(float64(len(ps)) / dt), "peak_rss_mib": peakRSS(), "checksum": sum})
}

func round(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }

func readPatches(path string) ([][3]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ps [][3]int
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		fs := strings.Fields(sc.Text())
		if len(fs) == 0 {
			continue
		}
		if len(fs) != 3 {
			return nil, fmt.Errorf("%s:%d: want z y x", path, line)
		}
		var p [3]int
		for k, s := range fs {
			if p[k], err = strconv.Atoi(s); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, line, err)
			}
		}
		ps = append(ps, p)
	}
	return ps, sc.Err()
}

// peakRSS is the process's peak resident set (VmHWM) in MiB.
func peakRSS() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			kb, _ := strconv.ParseFloat(strings.Fields(l)[1], 64)
			return round(kb / 1024)
		}
	}
	return 0
}
