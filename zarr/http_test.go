package zarr

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/voxtrain/voxtrain/volume"
)

// testServer serves testdata over HTTP as a static host would (Range
// GETs answered 206), with injected trouble.
type testServer struct {
	*httptest.Server
	latency time.Duration
	// failEvery: the first attempt of every failEvery-th distinct GET
	// (path and Range) fails, by turns with a 503 and a dropped
	// connection.
	failEvery int
	// ignoreRange answers every GET with 200 and the whole object.
	ignoreRange bool
	// status, when it returns non-zero for a path, is the answer to
	// every GET of it.
	status func(p string) int
	// stall: GETs of chunks (not metadata) wait for the client to go.
	stall bool
	// before, when set, sees every GET first; true: it answered.
	before func(w http.ResponseWriter, r *http.Request) bool
	// root is the folder served ("": testdata).
	root string

	mu       sync.Mutex
	seen     map[string]int // attempts per distinct GET
	perPath  map[string]int // GETs per path
	distinct int
	inflight atomic.Int32
	peak     atomic.Int32
	started  atomic.Int32
	ended    atomic.Int32
}

func newTestServer(t *testing.T, configure func(*testServer)) *testServer {
	t.Helper()
	old := retryBackoff
	retryBackoff = time.Millisecond
	s := &testServer{seen: map[string]int{}, perPath: map[string]int{}}
	if configure != nil {
		configure(s)
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(func() {
		s.Close()
		retryBackoff = old
	})
	return s
}

func isMeta(p string) bool {
	switch path.Base(p) {
	case "zarr.json", ".zarray", ".zattrs", ".zgroup", "attributes.json":
		return true
	}
	return false
}

func (s *testServer) serve(w http.ResponseWriter, r *http.Request) {
	n := s.inflight.Add(1)
	defer s.inflight.Add(-1)
	for {
		p := s.peak.Load()
		if n <= p || s.peak.CompareAndSwap(p, n) {
			break
		}
	}
	s.started.Add(1)
	defer s.ended.Add(1)
	if s.before != nil && s.before(w, r) {
		return
	}
	p := r.URL.Path
	s.mu.Lock()
	key := p + " " + r.Header.Get("Range")
	attempt := s.seen[key]
	if attempt == 0 {
		s.distinct++
	}
	s.seen[key]++
	s.perPath[p]++
	failNow := s.failEvery > 0 && attempt == 0 && s.distinct%s.failEvery == 0
	drop := s.distinct%(2*max(s.failEvery, 1)) == 0
	s.mu.Unlock()
	if s.latency > 0 {
		time.Sleep(s.latency)
	}
	if s.stall && !isMeta(p) {
		<-r.Context().Done()
		return
	}
	if s.status != nil {
		if c := s.status(p); c != 0 {
			http.Error(w, http.StatusText(c), c)
			return
		}
	}
	if failNow {
		if drop {
			// Close the connection without an answer.
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		http.Error(w, "try later", http.StatusServiceUnavailable)
		return
	}
	root := s.root
	if root == "" {
		root = "testdata"
	}
	f, err := os.Open(filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(p, "/"))))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.IsDir() {
		http.NotFound(w, r)
		return
	}
	if s.ignoreRange {
		b, _ := os.ReadFile(f.Name())
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		_, _ = w.Write(b)
		return
	}
	http.ServeContent(w, r, "", time.Time{}, f)
}

func (s *testServer) gets(p string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.perPath[p]
}

// TestHTTPReadsEqualLocal reads every conformance fixture over HTTP (from
// a server that drops or refuses some GETs' first attempts, or that
// ignores Range) and checks it against zarr-python's read, as the local
// conformance test does.
func TestHTTPReadsEqualLocal(t *testing.T) {
	fixtures := loadFixtures(t)
	for _, mode := range []string{"flaky", "no-range"} {
		t.Run(mode, func(t *testing.T) {
			srv := newTestServer(t, func(s *testServer) {
				if mode == "flaky" {
					s.latency, s.failEvery = time.Millisecond, 5
				} else {
					s.ignoreRange = true
				}
			})
			for _, want := range fixtures {
				u := srv.URL + "/" + want.Path
				if !Match(u) || !volume.Readable(u) {
					t.Fatalf("Match(%s) = false", u)
				}
				f, err := volume.Open(u)
				if want.Error != "" {
					if err == nil || !strings.Contains(err.Error(), want.Error) {
						t.Fatalf("%s: Open: err = %v, want one about %q", want.Path, err, want.Error)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", want.Path, err)
				}
				h := f.Header()
				if h.Shape != want.Shape || h.Channels != want.Channels || h.Spacing != want.Spacing {
					t.Fatalf("%s: %v × %d spacing %v, want %v × %d spacing %v", want.Path, h.Shape, h.Channels, h.Spacing, want.Shape, want.Channels, want.Spacing)
				}
				whole := readAll(t, f, volume.Whole(h.Shape))
				if got := voxelSHA(whole); got != want.SHA256 {
					t.Fatalf("%s: voxel sha256 %s, want %s", want.Path, got, want.SHA256)
				}
				box := testBoxes(h.Shape)[3]
				got := readAll(t, f, box)
				if d := diffBox(got[0], whole[0], h.Shape, box); d != "" {
					t.Fatalf("%s: region %v: %s", want.Path, box, d)
				}
				if want.Levels > 0 {
					if ls, err := Levels(u); err != nil || len(ls) != want.Levels {
						t.Fatalf("%s: Levels = %v, %v; want %d", want.Path, ls, err, want.Levels)
					}
				}
				f.Close()
			}
			if mode == "flaky" && srv.distinct < 500 {
				t.Fatalf("%d distinct GETs: the fixtures were not all read over HTTP", srv.distinct)
			}
		})
	}
}

// TestHTTPRangeReadsOfShards checks that a sharded array's index and
// inner chunks are fetched by Range GETs, not whole shards.
func TestHTTPRangeReadsOfShards(t *testing.T) {
	var ranges atomic.Int32
	srv := newTestServer(t, func(s *testServer) {
		s.before = func(w http.ResponseWriter, r *http.Request) bool {
			if strings.Contains(r.URL.Path, "/c/") {
				if r.Header.Get("Range") == "" {
					t.Errorf("GET %s without Range", r.URL.Path)
				}
				ranges.Add(1)
			}
			return false
		}
	})
	for _, p := range []string{"v3/shard_end_int16.zarr", "v3/shard_start_uint8.zarr"} {
		f, err := Open(srv.URL + "/" + p)
		if err != nil {
			t.Fatal(err)
		}
		lf, err := Open(filepath.Join("testdata", p))
		if err != nil {
			t.Fatal(err)
		}
		box := volume.Box{Lo: [3]int{1, 2, 3}, Hi: [3]int{5, 7, 8}}
		if got, want := voxelSHA(readAll(t, f, box)), voxelSHA(readAll(t, lf, box)); got != want {
			t.Fatalf("%s: HTTP read differs from the local read", p)
		}
	}
	if ranges.Load() == 0 {
		t.Fatal("no shard was read")
	}
}

// TestHTTPFailures: a chunk that always fails is an error naming its URL
// after the retries; 403 is an error at once; a 404 chunk is fill.
func TestHTTPFailures(t *testing.T) {
	const store = "/v2/comp_zlib_i2.zarr"
	srv := newTestServer(t, func(s *testServer) {
		s.status = func(p string) int {
			switch p {
			case store + "/0.0.1":
				return http.StatusServiceUnavailable
			case store + "/0.0.2":
				return http.StatusForbidden
			case store + "/0.0.0":
				return http.StatusNotFound
			}
			return 0
		}
	})
	f, err := OpenWith(srv.URL+store, Options{Retries: 2})
	if err != nil {
		t.Fatal(err)
	}
	read := func(box volume.Box) ([]float32, error) {
		dst := [][]float32{make([]float32, box.Voxels())}
		return dst[0], f.ReadRegion(box, dst)
	}
	_, err = read(volume.Box{Lo: [3]int{0, 0, 4}, Hi: [3]int{1, 1, 5}}) // chunk 0.0.1
	if err == nil || !strings.Contains(err.Error(), srv.URL+store+"/0.0.1") || !strings.Contains(err.Error(), "503") {
		t.Fatalf("always-503 chunk: err = %v, want one naming its URL and the status", err)
	}
	if n := srv.gets(store + "/0.0.1"); n != 3 {
		t.Fatalf("always-503 chunk: %d GETs, want 3 (Retries 2)", n)
	}
	_, err = read(volume.Box{Lo: [3]int{0, 0, 8}, Hi: [3]int{1, 1, 9}}) // chunk 0.0.2
	if err == nil || !strings.Contains(err.Error(), srv.URL+store+"/0.0.2") || !strings.Contains(err.Error(), "403") {
		t.Fatalf("403 chunk: err = %v, want one naming its URL and the status", err)
	}
	if n := srv.gets(store + "/0.0.2"); n != 1 {
		t.Fatalf("403 chunk: %d GETs, want 1 (not retried)", n)
	}
	// 0.0.0 answers 404: fill (1); the rest of the box as read locally.
	got, err := read(volume.Box{Lo: [3]int{0, 0, 0}, Hi: [3]int{6, 7, 4}})
	if err != nil {
		t.Fatal(err)
	}
	lf, err := Open("testdata" + store)
	if err != nil {
		t.Fatal(err)
	}
	want := readAll(t, lf, volume.Box{Lo: [3]int{0, 0, 0}, Hi: [3]int{6, 7, 4}})[0]
	fills := 0
	for z := range 6 {
		for y := range 7 {
			for x := range 4 {
				i := (z*7+y)*4 + x
				if z < 4 && y < 4 {
					if got[i] != 1 {
						t.Fatalf("voxel (%d,%d,%d) of the 404 chunk = %g, want the fill 1", z, y, x, got[i])
					}
					fills += int(boolInt(want[i] != 1))
				} else if got[i] != want[i] {
					t.Fatalf("voxel (%d,%d,%d) = %g, local %g", z, y, x, got[i], want[i])
				}
			}
		}
	}
	if fills == 0 {
		t.Fatal("the hidden chunk holds only fill locally: the test shows nothing")
	}
	if n := srv.gets(store + "/0.0.0"); n != 1 {
		t.Fatalf("404 chunk: %d GETs, want 1", n)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestHTTPTimeoutRetried: a GET with no answer within Timeout is tried
// again; one that never answers fails naming its URL.
func TestHTTPTimeoutRetried(t *testing.T) {
	var slow atomic.Int32
	srv := newTestServer(t, func(s *testServer) {
		s.before = func(w http.ResponseWriter, r *http.Request) bool {
			switch {
			case strings.HasSuffix(r.URL.Path, "/0.0.0") && slow.Add(1) == 1:
				<-r.Context().Done() // the first attempt hangs
				return true
			case strings.HasSuffix(r.URL.Path, "/1.0.0"):
				<-r.Context().Done() // every attempt hangs
				return true
			}
			return false
		}
	})
	f, err := OpenWith(srv.URL+"/v2/comp_zlib_i2.zarr", Options{Timeout: 50 * time.Millisecond, Retries: 1})
	if err != nil {
		t.Fatal(err)
	}
	dst := [][]float32{make([]float32, 1)}
	if err := f.ReadRegion(volume.Box{Hi: [3]int{1, 1, 1}}, dst); err != nil {
		t.Fatalf("a GET that timed out once: %v", err)
	}
	if slow.Load() != 2 {
		t.Fatalf("%d GETs of the slow chunk, want 2", slow.Load())
	}
	err = f.ReadRegion(volume.Box{Lo: [3]int{4, 0, 0}, Hi: [3]int{5, 1, 1}}, dst)
	if err == nil || !strings.Contains(err.Error(), "/1.0.0") || !strings.Contains(err.Error(), "within") {
		t.Fatalf("a GET that never answers: err = %v", err)
	}
}

// TestHTTPCancelAndConcurrency: at most MaxConcurrent GETs are in
// flight, and cancelling the file's context ends them and the read.
func TestHTTPCancelAndConcurrency(t *testing.T) {
	srv := newTestServer(t, func(s *testServer) { s.stall = true })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f, err := OpenContext(ctx, srv.URL+"/v2/comp_zlib_i2.zarr", Options{MaxConcurrent: 3})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		h := f.Header()
		dst := [][]float32{make([]float32, volume.Whole(h.Shape).Voxels())}
		done <- f.ReadRegion(volume.Whole(h.Shape), dst)
	}()
	deadline := time.Now().Add(3 * time.Second)
	for srv.inflight.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d GETs in flight, want 3", srv.inflight.Load())
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // room for a GET over the bound
	if p := srv.peak.Load(); p != 3 {
		t.Fatalf("%d GETs in flight at most, want MaxConcurrent 3", p)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("read after cancel: err = %v, want context.Canceled", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the read did not end on cancel")
	}
	for srv.inflight.Load() != 0 {
		if time.Now().After(deadline.Add(3 * time.Second)) {
			t.Fatalf("%d GETs still in flight on the server after cancel", srv.inflight.Load())
		}
		time.Sleep(time.Millisecond)
	}
}

func TestURLLocations(t *testing.T) {
	for _, c := range []struct {
		path, root, inner string
	}{
		{"https://h.org/data/case.ome.zarr", "https://h.org/data/case.ome.zarr", ""},
		{"https://h.org/data/case.ome.zarr/0", "https://h.org/data/case.ome.zarr", "0"},
		{"http://h.org:8080/a//b/./x.n5/s0/", "http://h.org:8080/a/b/x.n5", "s0"},
	} {
		root, inner, ok := splitStore(c.path)
		if !ok || root != c.root || inner != c.inner || !Match(c.path) {
			t.Errorf("splitStore(%s) = %q, %q, %v; want %q, %q", c.path, root, inner, ok, c.root, c.inner)
		}
	}
	if Match("https://h.org/x.zarr/case.nii.gz") || Match("https://h.org/data/case") {
		t.Error("Match accepts a URL that is no store")
	}
	if got := joinLoc("https://h.org/a/x.zarr", "../x.zarr/1"); got != "https://h.org/a/x.zarr/1" {
		t.Errorf("joinLoc = %s", got)
	}
	if got := parentLoc("https://h.org/a/x.zarr/1"); got != "https://h.org/a/x.zarr" {
		t.Errorf("parentLoc = %s", got)
	}
	for _, bad := range []string{"https://h.org/x.zarr?sig=1", "https:///x.zarr"} {
		if _, err := Open(bad); err == nil {
			t.Errorf("Open(%s): no error", bad)
		}
	}
	if _, err := CreateImage("https://h.org/out.ome.zarr", ImageSpec{}); err == nil || !strings.Contains(err.Error(), "local folders only") {
		t.Errorf("CreateImage of a URL: %v", err)
	}
}

func TestContentRange(t *testing.T) {
	for _, c := range []struct {
		s                  string
		first, last, total int64
		ok                 bool
	}{
		{"bytes 0-9/100", 0, 9, 100, true},
		{"bytes 90-99/100", 90, 99, 100, true},
		{"bytes */100", 0, -1, 100, true},
		{"bytes 9-0/100", 0, 0, 0, false},
		{"items 0-9/100", 0, 0, 0, false},
		{"bytes 0-9/*", 0, 0, 0, false},
	} {
		f, l, tot, ok := contentRange(c.s)
		if ok != c.ok || (ok && (f != c.first || l != c.last || tot != c.total)) {
			t.Errorf("contentRange(%q) = %d, %d, %d, %v", c.s, f, l, tot, ok)
		}
	}
}
