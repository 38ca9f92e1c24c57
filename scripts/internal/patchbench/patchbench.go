// Package patchbench is the Go side of the random-patch read benchmarks
// (scripts/bench_zarr, scripts/bench_tiff): it reads a bench.py patch list,
// reads each 128³ patch of a volume.File as float32 (what the training
// pipeline consumes) on a number of threads sharing the file, and prints
// the JSON line bench.py's readers print, so the sides compare line for
// line in docs/BENCHMARKS.md.
package patchbench

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
)

// Patch is the patches' edge, as in bench.py.
const Patch = 128

// Options are the flags every reader takes.
type Options struct {
	Dir        string // the folder bench.py make wrote (patches.txt)
	Threads    int    // patches read at once, and GOMAXPROCS
	CPUProfile string // a CPU profile's file ("": none)
	MemProfile string // a heap profile's file, written after the reads ("": none)
}

// Flags registers -dir, -threads, -cpuprofile and -memprofile on the command line.
func Flags() *Options {
	o := &Options{}
	flag.StringVar(&o.Dir, "dir", "", "the folder bench.py make wrote")
	flag.IntVar(&o.Threads, "threads", 2, "patches read at once (and GOMAXPROCS)")
	flag.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile here")
	flag.StringVar(&o.MemProfile, "memprofile", "", "write a heap profile here after the reads (what they left allocated)")
	return o
}

// Main parses the flags, runs run under the CPU profile asked for, writes
// the heap profile asked for, and exits non-zero naming the command when
// it fails.
func Main(name string, o *Options, run func() error) {
	flag.Parse()
	runtime.GOMAXPROCS(o.Threads)
	if o.CPUProfile != "" {
		pf, err := os.Create(o.CPUProfile)
		if err == nil {
			err = pprof.StartCPUProfile(pf)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
			os.Exit(1)
		}
	}
	err := run()
	pprof.StopCPUProfile()
	if err == nil && o.MemProfile != "" {
		var pf *os.File
		if pf, err = os.Create(o.MemProfile); err == nil {
			runtime.GC() // the in-use figures as of now, not of the last collection
			err = pprof.Lookup("heap").WriteTo(pf, 0)
			if cerr := pf.Close(); err == nil {
				err = cerr
			}
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

// Run reads every patch of o.Dir/patches.txt from f on o.Threads
// goroutines and prints the JSON line (reader names the Go side).
func Run(o *Options, reader string, f volume.File) error {
	ps, err := readPatches(filepath.Join(o.Dir, "patches.txt"))
	if err != nil {
		return err
	}
	check := make([]float64, len(ps))
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, o.Threads)
	t0 := time.Now()
	for range o.Threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dst := [][]float32{make([]float32, Patch*Patch*Patch)}
			for {
				i := int(next.Add(1)) - 1
				if i >= len(ps) {
					return
				}
				p := ps[i]
				box := volume.Box{Lo: p, Hi: [3]int{p[0] + Patch, p[1] + Patch, p[2] + Patch}}
				if err := f.ReadRegion(box, dst); err != nil {
					errs <- err
					return
				}
				// bench.py's checksum: every 16th voxel of the patch.
				s := 0.0
				for z := 0; z < Patch; z += 16 {
					for y := 0; y < Patch; y += 16 {
						for x := 0; x < Patch; x += 16 {
							s += float64(dst[0][(z*Patch+y)*Patch+x])
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
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"reader": reader, "threads": o.Threads, "patches": len(ps),
		"seconds": round(dt), "samples_per_s": round(float64(len(ps)) / dt), "peak_rss_mib": peakRSS(), "checksum": sum})
}

func round(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }

// readPatches reads bench.py's patch list: "z y x" origins, a line each.
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
