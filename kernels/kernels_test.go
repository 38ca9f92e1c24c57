package kernels

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/internal/geom"
)

var (
	entryRE = regexp.MustCompile(`(?m)^\.visible \.entry (\w+)\(\s*((?:\.param[^)]*)?)\)`)
	paramRE = regexp.MustCompile(`\.param \.(\w+)(?: \.ptr(?: \.\w+)*)? (\w+)_param_(\d+)`)
)

// ptxEntries parses a PTX module's kernel entries into name -> param kinds.
func ptxEntries(t *testing.T, ptx []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range entryRE.FindAllSubmatch(ptx, -1) {
		name := string(m[1])
		var kinds strings.Builder
		for i, p := range paramRE.FindAllSubmatch(m[2], -1) {
			if string(p[2]) != name || string(p[3]) != strconv.Itoa(i) {
				t.Fatalf("entry %s: unexpected parameter %q", name, p[0])
			}
			switch string(p[1]) {
			case "u64":
				kinds.WriteByte('p')
			case "u32", "s32":
				kinds.WriteByte('i')
			case "f32":
				kinds.WriteByte('f')
			case "f64":
				kinds.WriteByte('d')
			default:
				t.Fatalf("entry %s: parameter type .%s not in the table's kinds", name, p[1])
			}
		}
		out[name] = kinds.String()
	}
	return out
}

// TestTableMatchesPTX holds the Go table (what package gpu packs into
// cuLaunchKernel) to the parameter lists nvcc compiled.
func TestTableMatchesPTX(t *testing.T) {
	inPTX := map[string]string{}
	module := map[string]string{}
	for _, mod := range Modules() {
		b, err := PTX(mod)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(".target sm_80")) {
			t.Errorf("module %s is not PTX for sm_80/compute_80", mod)
		}
		for name, kinds := range ptxEntries(t, b) {
			if prev, dup := module[name]; dup {
				t.Errorf("entry %s in modules %s and %s", name, prev, mod)
			}
			inPTX[name], module[name] = kinds, mod
		}
	}
	seen := map[string]bool{}
	for _, k := range All() {
		if seen[k.Name] {
			t.Errorf("kernel %s listed twice", k.Name)
		}
		seen[k.Name] = true
		kinds, ok := inPTX[k.Name]
		switch {
		case !ok:
			t.Errorf("kernel %s (module %s) is not in the PTX", k.Name, k.Module)
		case module[k.Name] != k.Module:
			t.Errorf("kernel %s: table says module %s, PTX has it in %s", k.Name, k.Module, module[k.Name])
		case kinds != k.Params:
			t.Errorf("kernel %s: table params %q, PTX params %q", k.Name, k.Params, kinds)
		}
		if k.SharedBytes > 48<<10 {
			t.Errorf("kernel %s: %d bytes of static shared memory exceed 48 KiB", k.Name, k.SharedBytes)
		}
	}
	for name := range inPTX {
		if !seen[name] {
			t.Errorf("PTX entry %s (module %s) is missing from the table", name, module[name])
		}
	}
	t.Logf("%d kernels in %d PTX modules match the table", len(table), len(Modules()))
}

// TestPTXUpToDate fails when a .cu/.cuh source or a PTX file differs from
// the hashes gen_ptx.sh recorded: the PTX was not regenerated (or was edited).
func TestPTXUpToDate(t *testing.T) {
	manifest, err := fs.ReadFile(ptxFS, "ptx/SOURCES.sha256")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(manifest))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			t.Fatalf("SOURCES.sha256: bad line %q", line)
		}
		want[f[1]] = f[0]
	}
	have := map[string]string{}
	hash := func(fsys fs.FS, name, key string) {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(b)
		have[key] = hex.EncodeToString(s[:])
	}
	srcs, _ := fs.Glob(srcFS, "*.cu*")
	for _, s := range srcs {
		hash(srcFS, s, s)
	}
	ptxs, _ := fs.Glob(ptxFS, "ptx/*.ptx")
	for _, p := range ptxs {
		hash(ptxFS, p, p)
	}
	var names []string
	for n := range want {
		names = append(names, n)
	}
	for n := range have {
		if _, ok := want[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		switch w, h := want[n], have[n]; {
		case w == "":
			t.Errorf("%s is not in ptx/SOURCES.sha256: the PTX predates it; run make kernels (kernels/gen_ptx.sh, needs nvcc)", n)
		case h == "":
			t.Errorf("%s is recorded in ptx/SOURCES.sha256 but missing; run make kernels", n)
		case w != h:
			t.Errorf("%s changed since the PTX was generated; run make kernels (kernels/gen_ptx.sh, needs nvcc) and commit kernels/ptx", n)
		}
	}
}

func TestPTXUnknownModule(t *testing.T) {
	if _, err := PTX("nope"); err == nil || !strings.Contains(err.Error(), "conv") {
		t.Fatalf("PTX(nope) = %v, want an error listing the modules", err)
	}
	b, err := PTX("conv")
	if err != nil || !bytes.Contains(b, []byte(".entry vol2col(")) {
		t.Fatalf("PTX(conv): %v", err)
	}
}

// TestCol2VolRange checks that the range covers every input voxel each
// tile's rows read, for strided, padded and transposed-conv geometries.
func TestCol2VolRange(t *testing.T) {
	geoms := []geom.Conv{
		{N: 2, InD: 5, InH: 4, InW: 3, InC: 2, OutC: 1, KD: 3, KH: 3, KW: 3, SD: 1, SH: 1, SW: 1, PD: 1, PH: 1, PW: 1},
		{N: 2, InD: 7, InH: 5, InW: 6, InC: 1, OutC: 1, KD: 3, KH: 3, KW: 3, SD: 2, SH: 2, SW: 2, PD: 1, PH: 1, PW: 1},
		{N: 3, InD: 5, InH: 4, InW: 4, InC: 1, OutC: 1, KD: 2, KH: 2, KW: 2, SD: 2, SH: 2, SW: 2},
		{N: 1, InD: 3, InH: 3, InW: 3, InC: 1, OutC: 1, KD: 3, KH: 3, KW: 3, SD: 1, SH: 1, SW: 1, PD: 3, PH: 0, PW: 0},
	}
	for _, g := range geoms {
		oD, oH, oW := g.OutD(), g.OutH(), g.OutW()
		total := g.N * oD * oH * oW
		for _, tile := range []int{1, 5, oW * oH, total} {
			for m0 := 0; m0 < total; m0 += tile {
				rows := min(tile, total-m0)
				lo, count := Col2VolRange(g, m0, rows)
				for m := m0; m < m0+rows; m++ {
					n, r := m/(oD*oH*oW), m%(oD*oH*oW)
					od, oh, ow := r/(oH*oW), r/oW%oH, r%oW
					for kd := 0; kd < g.KD; kd++ {
						for kh := 0; kh < g.KH; kh++ {
							for kw := 0; kw < g.KW; kw++ {
								id, ih, iw := od*g.SD-g.PD+kd, oh*g.SH-g.PH+kh, ow*g.SW-g.PW+kw
								if id < 0 || id >= g.InD || ih < 0 || ih >= g.InH || iw < 0 || iw >= g.InW {
									continue
								}
								v := ((n*g.InD+id)*g.InH+ih)*g.InW + iw
								if v < lo || v >= lo+count {
									t.Fatalf("geom %+v rows [%d,%d): voxel %d read but range is [%d,%d)", g, m0, m0+rows, v, lo, lo+count)
								}
							}
						}
					}
				}
			}
		}
	}
}

func TestVol2ColTileRows(t *testing.T) {
	g := geom.Conv{N: 2, InD: 8, InH: 8, InW: 8, InC: 4, OutC: 4, KD: 3, KH: 3, KW: 3, SD: 1, SH: 1, SW: 1, PD: 1, PH: 1, PW: 1}
	k := 27 * 4
	if r := Vol2ColTileRows(g, 100*4*k+3); r != 100 {
		t.Errorf("rows = %d, want 100", r)
	}
	if r := Vol2ColTileRows(g, 1); r != 1 {
		t.Errorf("rows = %d, want at least 1", r)
	}
	if r := Vol2ColTileRows(g, 1<<40); r != 2*512 {
		t.Errorf("rows = %d, want all %d", r, 2*512)
	}
}
