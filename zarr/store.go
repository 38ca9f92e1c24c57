package zarr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/voxtrain/voxtrain/volume"
)

// store reads a store's objects. A key is an object's full location: a
// file path for a local store, a URL for a remote one (so that errors
// name what a user can look at).
type store interface {
	// get returns the whole object; a missing object is an error
	// wrapping fs.ErrNotExist.
	get(ctx context.Context, key string) ([]byte, error)
	// getRange returns the bytes [off, off+n) of the object, clipped to
	// its end (the last n bytes when off < 0), and the object's size.
	getRange(ctx context.Context, key string, off, n int64) ([]byte, int64, error)
}

// Defaults of the Options that govern reading a store over HTTP.
const (
	DefaultTimeout       = 30 * time.Second
	DefaultRetries       = 4
	DefaultMaxConcurrent = 16
)

// retryBackoff is the wait before the first retry of a failed GET; it
// doubles with each further retry (with up to 50% jitter, so that the
// GETs a failure hit do not come back together). Tests shorten it.
var retryBackoff = 250 * time.Millisecond

// source is a store with what reading through it takes: the context its
// reads run under, how many chunks a read fetches at a time, and the
// metadata objects already read while opening (so that probing for
// zarr.json, .zarray, ... and reading them is one GET each).
type source struct {
	st      store
	ctx     context.Context
	workers int
	mu      sync.Mutex
	meta    map[string]metaObject
}

type metaObject struct {
	b   []byte
	err error
}

// localSource reads local files, as the package always has.
func localSource() *source {
	return &source{st: fileStore{}, ctx: context.Background(), meta: map[string]metaObject{}}
}

// newSource picks the store for path: http(s) URLs are read over HTTP
// with opt's timeout, retries and concurrency, anything else is a local
// path.
func newSource(ctx context.Context, path string, opt Options) *source {
	s := localSource()
	s.ctx = ctx
	if isURL(path) {
		h := &httpStore{client: httpClient, timeout: opt.Timeout, retries: opt.Retries}
		if h.timeout <= 0 {
			h.timeout = DefaultTimeout
		}
		switch {
		case h.retries == 0:
			h.retries = DefaultRetries
		case h.retries < 0:
			h.retries = 0
		}
		mc := opt.MaxConcurrent
		if mc <= 0 {
			mc = DefaultMaxConcurrent
		}
		h.sem = make(chan struct{}, mc)
		s.st, s.workers = h, mc
	}
	return s
}

// getMeta reads a metadata object once per source.
func (s *source) getMeta(key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.meta[key]; ok {
		return o.b, o.err
	}
	b, err := s.st.get(s.ctx, key)
	// A failed GET (not a missing object) is not remembered: opening
	// again may succeed.
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		s.meta[key] = metaObject{b, err}
	}
	return b, err
}

// exists reports whether a metadata object is there; an error other than
// its absence counts as there, so that reading it reports the error.
func (s *source) exists(key string) bool {
	_, err := s.getMeta(key)
	return !errors.Is(err, fs.ErrNotExist)
}

// fileStore reads local files.
type fileStore struct{}

func (fileStore) get(ctx context.Context, key string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return os.ReadFile(key)
}

func (fileStore) getRange(ctx context.Context, key string, off, n int64) ([]byte, int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	f, err := os.Open(key)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	size := st.Size()
	if off < 0 {
		off = max(size-n, 0)
	}
	n = max(min(n, size-off), 0)
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil && !(err == io.EOF && n == 0) {
		return nil, size, err
	}
	return b, size, nil
}

// isURL reports whether p is an http:// or https:// URL.
func isURL(p string) bool { return volume.IsURL(p) }

// splitURL splits a URL into its scheme and host ("https://host") and
// its path ("/a/b", "/" when empty).
func splitURL(u string) (prefix, p string) {
	i := strings.Index(u, "://") + 3
	j := strings.IndexByte(u[i:], '/')
	if j < 0 {
		return u, "/"
	}
	return u[:i+j], u[i+j:]
}

// Locations are file paths or URLs; these are filepath's functions for
// both.

func cleanLoc(p string) string {
	if isURL(p) {
		pre, rest := splitURL(p)
		return pre + path.Clean(rest)
	}
	return filepath.Clean(p)
}

// joinLoc joins dir and rel, a slash-separated path inside it.
func joinLoc(dir, rel string) string {
	if isURL(dir) {
		pre, rest := splitURL(dir)
		return pre + path.Join(rest, rel)
	}
	return filepath.Join(dir, filepath.FromSlash(rel))
}

func parentLoc(p string) string {
	if isURL(p) {
		pre, rest := splitURL(p)
		return pre + path.Dir(rest)
	}
	return filepath.Dir(p)
}

func baseLoc(p string) string {
	if isURL(p) {
		_, rest := splitURL(p)
		return path.Base(rest)
	}
	return filepath.Base(p)
}

// checkURL refuses what a store URL cannot be: no host, a query or a
// fragment (a chunk's URL is the store's with the chunk's key appended).
func checkURL(p string) error {
	u, err := url.Parse(p)
	if err != nil {
		return err
	}
	if u.Host == "" {
		return fmt.Errorf("%s: no host", p)
	}
	if u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(p, "?#") {
		return fmt.Errorf("%s: a store URL with a query or fragment is not read (chunk URLs are the store's with their key appended)", p)
	}
	return nil
}

// httpClient is shared by every remote store, so that connections to a
// host are reused across files.
var httpClient = func() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	return &http.Client{Transport: t}
}()

// httpStore reads a store served over http(s): GETs (Range GETs for
// parts of shards) of at most cap(sem) at a time, each bounded by
// timeout, retried up to retries times on what may pass (5xx, 429,
// timeouts, broken connections) but not on answers (404 is a missing
// object, 401/403 and other 4xx are errors).
type httpStore struct {
	client  *http.Client
	timeout time.Duration
	retries int
	sem     chan struct{}
}

func (h *httpStore) get(ctx context.Context, key string) ([]byte, error) {
	b, _, err := h.fetch(ctx, key, 0, 0, false)
	return b, err
}

func (h *httpStore) getRange(ctx context.Context, key string, off, n int64) ([]byte, int64, error) {
	if n <= 0 {
		return []byte{}, -1, nil
	}
	return h.fetch(ctx, key, off, n, true)
}

// fetch GETs key (bytes [off, off+n) of it when ranged; the last n when
// off < 0), retrying with exponential backoff.
func (h *httpStore) fetch(ctx context.Context, key string, off, n int64, ranged bool) ([]byte, int64, error) {
	var err error
	for attempt := 0; ; attempt++ {
		var b []byte
		var size int64
		var retry bool
		b, size, retry, err = h.once(ctx, key, off, n, ranged)
		if err == nil {
			return b, size, nil
		}
		if !retry || ctx.Err() != nil {
			return nil, 0, err
		}
		if attempt == h.retries {
			break
		}
		d := min(retryBackoff<<min(attempt, 20), 30*time.Second)
		d += time.Duration(rand.Int64N(int64(d)/2 + 1))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, 0, fmt.Errorf("%w (retrying after: %v)", ctx.Err(), err)
		case <-t.C:
		}
	}
	return nil, 0, fmt.Errorf("%w (%d attempts)", err, h.retries+1)
}

// once makes one GET; retry says whether a failure may pass.
func (h *httpStore) once(ctx context.Context, key string, off, n int64, ranged bool) (b []byte, size int64, retry bool, err error) {
	select {
	case h.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, 0, false, fmt.Errorf("GET %s: %w", key, ctx.Err())
	}
	defer func() { <-h.sem }()
	rctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, key, nil)
	if err != nil {
		return nil, 0, false, err
	}
	if ranged {
		if off < 0 {
			req.Header.Set("Range", fmt.Sprintf("bytes=-%d", n))
		} else {
			req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+n-1))
		}
	}
	resp, err := h.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("no answer within %v", h.timeout)
		}
		return nil, 0, true, fmt.Errorf("GET %s: %w", key, err)
	}
	defer resp.Body.Close()
	status := func() error { return fmt.Errorf("GET %s: %s", key, resp.Status) }
	switch c := resp.StatusCode; {
	case c == http.StatusNotFound || c == http.StatusGone:
		return nil, 0, false, fmt.Errorf("GET %s: %s: %w", key, resp.Status, fs.ErrNotExist)
	case c >= 500 || c == http.StatusTooManyRequests || c == http.StatusRequestTimeout:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		return nil, 0, true, status()
	case c == http.StatusRequestedRangeNotSatisfiable && ranged:
		// The range starts past the end: nothing of it is there.
		if _, _, total, ok := contentRange(resp.Header.Get("Content-Range")); ok {
			return []byte{}, total, false, nil
		}
		return nil, 0, false, status()
	case c != http.StatusOK && c != http.StatusPartialContent:
		return nil, 0, false, status()
	}
	if resp.ContentLength > maxChunkBytes {
		return nil, 0, false, fmt.Errorf("GET %s: %d bytes, over %d", key, resp.ContentLength, maxChunkBytes)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxChunkBytes+1))
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("body not read within %v", h.timeout)
		}
		return nil, 0, ctx.Err() == nil, fmt.Errorf("GET %s: %w", key, err)
	}
	if len(body) > maxChunkBytes {
		return nil, 0, false, fmt.Errorf("GET %s: over %d bytes", key, maxChunkBytes)
	}
	if resp.ContentLength >= 0 && int64(len(body)) != resp.ContentLength {
		return nil, 0, true, fmt.Errorf("GET %s: %d of %d bytes", key, len(body), resp.ContentLength)
	}
	if !ranged || resp.StatusCode == http.StatusOK {
		// Not ranged, or a server that ignores Range: the whole object.
		size = int64(len(body))
		if !ranged {
			return body, size, false, nil
		}
		if off < 0 {
			off = max(size-n, 0)
		}
		off = min(off, size)
		return body[off : off+max(min(n, size-off), 0)], size, false, nil
	}
	first, last, total, ok := contentRange(resp.Header.Get("Content-Range"))
	want := off
	if off < 0 {
		want = max(total-n, 0)
	}
	if !ok || first != want || last-first+1 != int64(len(body)) || last >= total {
		return nil, 0, false, fmt.Errorf("GET %s: Content-Range %q for Range %q (%d bytes)", key, resp.Header.Get("Content-Range"), req.Header.Get("Range"), len(body))
	}
	return body, total, false, nil
}

// contentRange parses "bytes first-last/total" or "bytes */total".
func contentRange(s string) (first, last, total int64, ok bool) {
	s, found := strings.CutPrefix(s, "bytes ")
	if !found {
		return 0, 0, 0, false
	}
	r, t, found := strings.Cut(s, "/")
	if !found {
		return 0, 0, 0, false
	}
	total, err := strconv.ParseInt(t, 10, 64)
	if err != nil || total < 0 {
		return 0, 0, 0, false
	}
	if r == "*" {
		return 0, -1, total, true
	}
	a, b, found := strings.Cut(r, "-")
	if !found {
		return 0, 0, 0, false
	}
	first, err1 := strconv.ParseInt(a, 10, 64)
	last, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || first < 0 || last < first {
		return 0, 0, 0, false
	}
	return first, last, total, true
}
