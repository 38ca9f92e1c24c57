package dist

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"
)

// The store's ops and statuses (message.op).
const (
	opHello       = 1 // arg: the rank; key: its label; val "watch": a watch connection
	opSet         = 2
	opGet         = 3 // arg: how long to wait in milliseconds, < 0 for ever
	opCheck       = 4 // a get that does not wait
	opAdd         = 5 // arg: the delta; the answer's arg: the new value
	opSetIfAbsent = 6 // the answer's val: the value now held (the first one set wins)
	opBye         = 7 // on a watch connection: its rank is leaving on purpose

	statusOK       = 0
	statusNotFound = 1
	statusError    = 2
)

// abortKey holds the first fault any rank (or the store, when a rank's
// watch connection drops) reported; every rank watches it.
const abortKey = "voxtrain/abort"

// ErrTimeout is wrapped by the store's and the communicators' timeouts.
var ErrTimeout = errors.New("timed out")

// Server is the store rank 0 serves: a map of keys to byte values that
// every rank reads and writes through a Store, like PyTorch's TCPStore.
// It also watches the ranks: a rank whose watch connection drops without
// saying goodbye (its process died) sets the abort key, naming it.
type Server struct {
	ln      net.Listener
	mu      sync.Mutex
	kv      map[string][]byte
	changed chan struct{} // closed and replaced at every change
	watches int           // open watch connections
	conns   map[net.Conn]bool
	closed  chan struct{}
	wg      sync.WaitGroup
}

// Serve starts a store listening on addr (host:port; port 0 picks one,
// see Addr).
func Serve(addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("store: listen on %s: %w", addr, err)
	}
	s := &Server{ln: ln, kv: map[string][]byte{}, changed: make(chan struct{}), conns: map[net.Conn]bool{}, closed: make(chan struct{})}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr is the address the store listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		select {
		case <-s.closed:
			s.mu.Unlock()
			c.Close()
			return
		default:
		}
		s.conns[c] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serveConn(c)
	}
}

// notify wakes every waiting get; s.mu is held.
func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// serveConn reads c's requests and answers them in order; a get waits
// without stopping the reading, so a connection that drops is seen at once.
func (s *Server) serveConn(c net.Conn) {
	defer s.wg.Done()
	gone := make(chan struct{})
	reqs := make(chan message, 4)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m := range reqs {
			resp, ok := s.handle(m, gone)
			if !ok {
				continue
			}
			if writeMessage(c, resp) != nil {
				c.Close()
			}
		}
	}()
	watch, bye, label, rank := false, false, "", 0
	for {
		m, err := readMessage(c)
		if err != nil {
			break
		}
		switch m.op {
		case opBye:
			bye = true
			continue
		case opHello:
			if string(m.val) == "watch" && !watch {
				watch, label, rank = true, m.key, int(m.arg)
				s.mu.Lock()
				s.watches++
				s.mu.Unlock()
			}
		}
		reqs <- m
	}
	close(gone)
	close(reqs)
	<-done
	c.Close()
	s.mu.Lock()
	delete(s.conns, c)
	if watch {
		s.watches--
		select {
		case <-s.closed:
		default:
			if _, set := s.kv[abortKey]; !set && !bye {
				s.kv[abortKey] = encodeFault(rank, label, "closed its connection")
			}
		}
		s.notify()
	}
	s.mu.Unlock()
}

// handle answers one request; ok is false when the connection went while
// a get waited (no answer is due).
func (s *Server) handle(m message, gone <-chan struct{}) (message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch m.op {
	case opHello:
		return message{op: statusOK}, true
	case opSet:
		s.kv[m.key] = m.val
		s.notify()
		return message{op: statusOK}, true
	case opCheck:
		if v, ok := s.kv[m.key]; ok {
			return message{op: statusOK, val: v}, true
		}
		return message{op: statusNotFound}, true
	case opSetIfAbsent:
		if _, ok := s.kv[m.key]; !ok {
			s.kv[m.key] = m.val
			s.notify()
		}
		return message{op: statusOK, val: s.kv[m.key]}, true
	case opAdd:
		var v int64
		if old, ok := s.kv[m.key]; ok {
			var err error
			if v, err = strconv.ParseInt(string(old), 10, 64); err != nil {
				return message{op: statusError, val: fmt.Appendf(nil, "add to %q: its value %q is not a number", m.key, old)}, true
			}
		}
		v += m.arg
		s.kv[m.key] = strconv.AppendInt(nil, v, 10)
		s.notify()
		return message{op: statusOK, arg: v}, true
	case opGet:
		var expire <-chan time.Time
		if m.arg >= 0 {
			t := time.NewTimer(time.Duration(m.arg) * time.Millisecond)
			defer t.Stop()
			expire = t.C
		}
		for {
			if v, ok := s.kv[m.key]; ok {
				return message{op: statusOK, val: v}, true
			}
			changed := s.changed
			s.mu.Unlock()
			select {
			case <-changed:
				s.mu.Lock()
			case <-expire:
				s.mu.Lock()
				if v, ok := s.kv[m.key]; ok {
					return message{op: statusOK, val: v}, true
				}
				return message{op: statusNotFound}, true
			case <-gone:
				s.mu.Lock()
				return message{}, false
			case <-s.closed:
				s.mu.Lock()
				return message{}, false
			}
		}
	}
	return message{op: statusError, val: fmt.Appendf(nil, "unknown op %d", m.op)}, true
}

// WaitIdle waits up to timeout for every watch connection to close (every
// rank has left); it reports whether they did. Rank 0 calls it before
// Close, so the store outlives the last rank that needs it.
func (s *Server) WaitIdle(timeout time.Duration) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		n, changed := s.watches, s.changed
		s.mu.Unlock()
		if n == 0 {
			return true
		}
		select {
		case <-changed:
		case <-deadline.C:
			return false
		}
	}
}

// Close stops the store and closes every connection.
func (s *Server) Close() error {
	s.mu.Lock()
	select {
	case <-s.closed:
		s.mu.Unlock()
		return nil
	default:
	}
	close(s.closed)
	err := s.ln.Close()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

// Store is one rank's connection to the store. Its methods may be called
// from several goroutines; they take turns.
type Store struct {
	addr        string
	rank, world int
	mu          sync.Mutex // one request at a time
	wmu         sync.Mutex // one write at a time (a bye may cross a get)
	conn        net.Conn
	broken      error
}

// storeSlack is how much longer than a get's own wait the client waits
// for the answer before it calls the store unreachable.
const storeSlack = 10 * time.Second

// Dial connects rank (of world) to the store at addr, retrying until
// timeout while rank 0 starts it.
func Dial(ctx context.Context, addr string, rank, world int, timeout time.Duration) (*Store, error) {
	deadline := time.Now().Add(timeout)
	var d net.Dialer
	var last error
	for {
		dctx, cancel := context.WithDeadline(ctx, deadline)
		c, err := d.DialContext(dctx, "tcp", addr)
		cancel()
		if err == nil {
			s := &Store{addr: addr, rank: rank, world: world, conn: c}
			if _, err := s.do(ctx, message{op: opHello, arg: int64(rank)}, 0); err != nil {
				c.Close()
				return nil, err
			}
			return s, nil
		}
		last = err
		if ctx.Err() != nil {
			return nil, fmt.Errorf("rank %d of %d: reaching the store at %s: %w", rank, world, addr, ctx.Err())
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("rank %d of %d could not reach the store at %s within %v: %w (%w)", rank, world, addr, timeout, last, ErrTimeout)
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

// Addr is the store's address.
func (s *Store) Addr() string { return s.addr }

// do sends m and reads the answer, allowing wait plus storeSlack for it.
func (s *Store) do(ctx context.Context, m message, wait time.Duration) (message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken != nil {
		return message{}, s.broken
	}
	if wait >= 0 {
		s.conn.SetDeadline(time.Now().Add(wait + storeSlack))
	} else {
		s.conn.SetDeadline(time.Time{})
	}
	stop := context.AfterFunc(ctx, func() { s.conn.SetDeadline(time.Unix(1, 0)) })
	s.wmu.Lock()
	err := writeMessage(s.conn, m)
	s.wmu.Unlock()
	var resp message
	if err == nil {
		resp, err = readMessage(s.conn)
	}
	stop()
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		s.broken = fmt.Errorf("rank %d of %d: the store at %s: %w", s.rank, s.world, s.addr, err)
		s.conn.Close()
		return message{}, s.broken
	}
	if resp.op == statusError {
		return message{}, fmt.Errorf("rank %d of %d: the store at %s: %s", s.rank, s.world, s.addr, resp.val)
	}
	return resp, nil
}

// Set sets key to val.
func (s *Store) Set(ctx context.Context, key string, val []byte) error {
	_, err := s.do(ctx, message{op: opSet, key: key, val: val}, 0)
	return err
}

// Get returns key's value, waiting up to timeout (< 0: for ever) for a
// rank to set it.
func (s *Store) Get(ctx context.Context, key string, timeout time.Duration) ([]byte, error) {
	arg := int64(-1)
	if timeout >= 0 {
		arg = timeout.Milliseconds()
	}
	resp, err := s.do(ctx, message{op: opGet, key: key, arg: arg}, timeout)
	if err != nil {
		return nil, err
	}
	if resp.op == statusNotFound {
		return nil, fmt.Errorf("rank %d of %d: no rank set %q at %s within %v (%w)", s.rank, s.world, key, s.addr, timeout, ErrTimeout)
	}
	return resp.val, nil
}

// TryGet returns key's value and true, or false when it is not set,
// without waiting.
func (s *Store) TryGet(ctx context.Context, key string) ([]byte, bool, error) {
	resp, err := s.do(ctx, message{op: opCheck, key: key}, 0)
	if err != nil {
		return nil, false, err
	}
	if resp.op != statusOK {
		return nil, false, nil
	}
	return resp.val, true, nil
}

// Add adds delta to the decimal integer at key (0 when not set) and
// returns the sum.
func (s *Store) Add(ctx context.Context, key string, delta int64) (int64, error) {
	resp, err := s.do(ctx, message{op: opAdd, key: key, arg: delta}, 0)
	return resp.arg, err
}

// Wait waits up to timeout, in all, until every key is set.
func (s *Store) Wait(ctx context.Context, keys []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, k := range keys {
		if _, err := s.Get(ctx, k, max(0, time.Until(deadline))); err != nil {
			if errors.Is(err, ErrTimeout) {
				return fmt.Errorf("rank %d of %d: no rank set %q at %s within %v (%w)", s.rank, s.world, k, s.addr, timeout, ErrTimeout)
			}
			return err
		}
	}
	return nil
}

// setIfAbsent sets key to val unless a value is there; it returns the
// value held, the first one set.
func (s *Store) setIfAbsent(ctx context.Context, key string, val []byte) ([]byte, error) {
	resp, err := s.do(ctx, message{op: opSetIfAbsent, key: key, val: val}, 0)
	return resp.val, err
}

// bye tells the store, on the watch connection, that the rank leaves on
// purpose: its connection closing next is no fault.
func (s *Store) bye() {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.conn.SetWriteDeadline(time.Now().Add(time.Second))
	writeMessage(s.conn, message{op: opBye})
}

// Close closes the connection.
func (s *Store) Close() error { return s.conn.Close() }
