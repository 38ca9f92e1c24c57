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

	"github.com/voxtrain/voxtrain/tiff"
	"github.com/voxtrain/voxtrain/volume"
)

const patch = 128

func main() {
	dir := flag.String("dir", "", "the folder bench.py make wrote")
	threads := flag.Int("threads", 2, "patches read at once (and GOMAXPROCS)")
	file := flag.String("file", "stack.tif", "the stack in DIR: stack.tif or stack_zstd.tif")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile here")
	flag.Parse()
	if *cpuprofile != "" {
		pf, err := os.Create(*cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(pf)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "tiffread:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(*dir, *file, *threads); err != nil {
		fmt.Fprintln(os.Stderr, "tiffread:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

func run(dir, file string, threads int) error {
	runtime.GOMAXPROCS(threads)
	ps, err := readPatches(filepath.Join(dir, "patches.txt"))
	if err != nil {
		return err
	}
	f, err := tiff.Open(filepath.Join(dir, file))
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
	reader := "go tiff " + file
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
