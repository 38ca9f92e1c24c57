package dist

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/voxtrain/voxtrain/internal/floatbytes"
)

// The CPU communicator: the ranks form a ring over TCP, each sending to
// the next rank (rank+1 mod size) and receiving from the previous one, on
// two connections made at Init from the addresses the ranks announced in
// the store.
//
// AllReduceSum is the ring all-reduce (reduce-scatter, then all-gather)
// on float32. buf (L elements) is cut into Size chunks, chunk c being
// elements [c·L/n, (c+1)·L/n) (integer division). Chunk c's sum starts
// at rank c and travels the ring once, each rank adding its own values
// in float32: it is the left fold
//
//	((x_c + x_{c+1}) + x_{c+2}) + … + x_{c+n−1}   (ranks mod n)
//
// and the all-gather then copies those bits to every rank. So the result
// is identical on every rank and depends only on the inputs, the rank
// count and L: the same run to run. (Across different L, as a different
// bucketing, the order of an element's terms may change.)
//
// Broadcast passes root's bytes around the ring; Barrier is an
// all-reduce of Size elements. Every message has a header (the call's
// kind, its sequence number, its length) so ranks whose calls differ fail
// with both calls named instead of mixing up their bytes.
//
// Faults. Every read and write must make progress within the timeout; a
// connection that closes, or a timeout, makes the rank that sees it
// publish the fault in the store's abort key (the first one published
// wins) and every rank watches that key, so all ranks' pending calls fail
// with the same error naming the faulty rank. The store also publishes
// the fault itself when a rank's process dies (its watch connection drops
// without goodbye), and a rank whose store drops blames rank 0. A stall
// is traced to its source: each rank that timed out records whom it
// waited for, and, after a short settling time, the rank at the end of
// that chain (the one waiting for nobody) is the one named.

// Message kinds: the calls.
const (
	kindAllReduce byte = 1
	kindBroadcast byte = 2
	kindBarrier   byte = 3
	kindHello     byte = 4
)

func kindName(k byte) string {
	switch k {
	case kindAllReduce:
		return "all-reduce"
	case kindBroadcast:
		return "broadcast"
	case kindBarrier:
		return "barrier"
	case kindHello:
		return "rendezvous"
	}
	return "call " + strconv.Itoa(int(k))
}

// PeerError is a collective call's failure caused by another rank.
type PeerError struct {
	// Rank and Addr name the faulty rank and the address it announced.
	Rank int
	Addr string
	// What it did: "closed its connection", "sent nothing for 30s", …
	What string
	// Op is the call that failed on this rank: "all-reduce", "broadcast",
	// "barrier".
	Op string
}

func (e *PeerError) Error() string {
	return fmt.Sprintf("rank %d (%s) %s during %s", e.Rank, e.Addr, e.What, e.Op)
}

// encodeFault and decodeFault carry a PeerError (without its Op) in the
// abort key: rank, tab, address, tab, what.
func encodeFault(rank int, addr, what string) []byte {
	return []byte(strconv.Itoa(rank) + "\t" + addr + "\t" + what)
}

func decodeFault(b []byte) error {
	parts := strings.SplitN(string(b), "\t", 3)
	if len(parts) == 3 {
		if r, err := strconv.Atoi(parts[0]); err == nil {
			return &PeerError{Rank: r, Addr: parts[1], What: parts[2]}
		}
	}
	return fmt.Errorf("the job was aborted: %s", b)
}

// tcpComm is the CPU communicator.
type tcpComm struct {
	rank, size int
	addrs      []string // every rank's announced address
	timeout    time.Duration
	store      *Store  // requests
	watch      *Store  // the abort key's watch
	server     *Server // rank 0's
	ln         net.Listener
	next, prev net.Conn
	seq        uint64
	scratch    []float32

	faultMu   sync.Mutex
	fault     error // set once: a *PeerError without Op, or another error
	closing   atomic.Bool
	watchDone chan struct{}
}

// isLoopback reports whether host names this machine's loopback.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func initTCP(ctx context.Context, env Env, opts Options) (_ Comm, err error) {
	c := &tcpComm{rank: env.Rank, size: env.WorldSize, timeout: opts.Timeout, addrs: make([]string, env.WorldSize), watchDone: make(chan struct{})}
	defer func() {
		if err != nil {
			c.closing.Store(true)
			c.closeAll()
		}
	}()
	joinDeadline := time.Now().Add(opts.JoinTimeout)
	if c.rank == 0 {
		// On one machine the store listens on the loopback address only;
		// across machines, on every interface, as TCPStore does.
		listen := net.JoinHostPort("", strconv.Itoa(env.MasterPort))
		if isLoopback(env.MasterAddr) {
			listen = env.Addr()
		}
		if c.server, err = Serve(listen); err != nil {
			return nil, fmt.Errorf("rank 0 of %d: %w", c.size, err)
		}
	}
	if c.store, err = Dial(ctx, env.Addr(), c.rank, c.size, opts.JoinTimeout); err != nil {
		return nil, err
	}
	// The ring's listener is on the address this machine reaches the
	// store from: one the other machines can reach.
	local := c.store.conn.LocalAddr().(*net.TCPAddr)
	if c.ln, err = net.Listen("tcp", net.JoinHostPort(local.IP.String(), "0")); err != nil {
		return nil, fmt.Errorf("rank %d of %d: %w", c.rank, c.size, err)
	}
	c.addrs[c.rank] = c.ln.Addr().String()
	if err := c.store.Set(ctx, "addr/"+strconv.Itoa(c.rank), []byte(c.addrs[c.rank])); err != nil {
		return nil, err
	}
	if err := c.join(ctx, env, opts.JoinTimeout); err != nil {
		return nil, err
	}
	if c.watch, err = Dial(ctx, env.Addr(), c.rank, c.size, time.Until(joinDeadline)); err != nil {
		return nil, err
	}
	if err := c.connectRing(ctx, joinDeadline); err != nil {
		return nil, err
	}
	watching := make(chan error, 1)
	go c.watchAbort(watching)
	if err := <-watching; err != nil {
		return nil, err
	}
	if err := c.Barrier(ctx); err != nil {
		return nil, fmt.Errorf("rank %d of %d: the first barrier: %w", c.rank, c.size, err)
	}
	return c, nil
}

// join waits for every rank's address.
func (c *tcpComm) join(ctx context.Context, env Env, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for r := range c.size {
		v, err := c.store.Get(ctx, "addr/"+strconv.Itoa(r), max(0, time.Until(deadline)))
		if errors.Is(err, ErrTimeout) {
			var missing []string
			for q := r; q < c.size; q++ {
				if _, ok, err := c.store.TryGet(ctx, "addr/"+strconv.Itoa(q)); err == nil && !ok {
					missing = append(missing, strconv.Itoa(q))
				}
			}
			who := "rank " + strings.Join(missing, ", ")
			if len(missing) > 1 {
				who = "ranks " + strings.Join(missing, ", ")
			}
			return fmt.Errorf("%s of %d did not join %s within %v (this is rank %d; %w)", who, c.size, env.Addr(), timeout, c.rank, ErrTimeout)
		}
		if err != nil {
			return err
		}
		c.addrs[r] = string(v)
	}
	return nil
}

// connectRing dials the next rank and accepts the previous one, each
// side saying who it is.
func (c *tcpComm) connectRing(ctx context.Context, deadline time.Time) error {
	next, prev := (c.rank+1)%c.size, (c.rank+c.size-1)%c.size
	accepted := make(chan error, 1)
	go func() {
		c.ln.(*net.TCPListener).SetDeadline(deadline)
		for {
			conn, err := c.ln.Accept()
			if err != nil {
				accepted <- fmt.Errorf("rank %d of %d: rank %d (%s) did not connect within the join timeout: %w", c.rank, c.size, prev, c.addrs[prev], err)
				return
			}
			conn.SetDeadline(deadline)
			var hello [16]byte
			if _, err := io.ReadFull(conn, hello[:]); err == nil &&
				binary.LittleEndian.Uint64(hello[:]) == uint64(prev) && binary.LittleEndian.Uint64(hello[8:]) == uint64(c.size) {
				conn.SetDeadline(time.Time{})
				c.prev = conn
				accepted <- nil
				return
			}
			conn.Close() // not our ring's previous rank
		}
	}()
	var d net.Dialer
	dctx, cancel := context.WithDeadline(ctx, deadline)
	conn, err := d.DialContext(dctx, "tcp", c.addrs[next])
	cancel()
	if err == nil {
		var hello [16]byte
		binary.LittleEndian.PutUint64(hello[:], uint64(c.rank))
		binary.LittleEndian.PutUint64(hello[8:], uint64(c.size))
		conn.SetDeadline(deadline)
		_, err = conn.Write(hello[:])
		conn.SetDeadline(time.Time{})
		c.next = conn
	}
	if err != nil {
		c.ln.Close() // stops the accept
		<-accepted
		return fmt.Errorf("rank %d of %d: connecting to rank %d at %s: %w", c.rank, c.size, next, c.addrs[next], err)
	}
	return <-accepted
}

// watchAbort waits on the watch connection for the abort key and aborts
// this rank's calls with the fault it holds; ready reports that the watch
// is registered.
func (c *tcpComm) watchAbort(ready chan<- error) {
	defer close(c.watchDone)
	label := c.addrs[c.rank]
	if _, err := c.watch.do(context.Background(), message{op: opHello, key: label, val: []byte("watch"), arg: int64(c.rank)}, 0); err != nil {
		ready <- err
		return
	}
	ready <- nil
	v, err := c.watch.Get(context.Background(), abortKey, -1)
	if c.closing.Load() {
		return
	}
	if err != nil {
		c.abort(c.storeGone())
		return
	}
	c.abort(decodeFault(v))
}

// storeGone is the fault when the store cannot be reached: rank 0, whose
// process serves it, died or hangs. Every rank that finds the store gone
// blames rank 0 — also one that first saw a ring neighbour close its
// connection, since that neighbour may only have been leaving because of
// rank 0 — so all ranks name the same rank.
func (c *tcpComm) storeGone() *PeerError {
	return &PeerError{Rank: 0, Addr: c.addrs[0], What: "closed its connection (the store at " + c.store.addr + " is gone)"}
}

// abort records the job's fault (the first one) and closes the ring's
// connections, so a pending call returns at once.
func (c *tcpComm) abort(fault error) error {
	c.faultMu.Lock()
	if c.fault == nil {
		c.fault = fault
	}
	fault = c.fault
	c.faultMu.Unlock()
	for _, conn := range []net.Conn{c.next, c.prev} {
		if conn != nil {
			conn.Close()
		}
	}
	return fault
}

// failed returns the recorded fault, nil when none.
func (c *tcpComm) failed() error {
	c.faultMu.Lock()
	defer c.faultMu.Unlock()
	return c.fault
}

// Fault returns the job's fault once one is known — a rank that died,
// stalled or left, published in the store and seen by this rank's watch —
// and nil until then. It does not block: the NCCL communicator polls it
// while it waits for the GPU, so a peer the TCP side has named is named
// there too.
func (c *tcpComm) Fault() error { return c.failed() }

// withOp names the call in a fault.
func withOp(fault error, op string) error {
	var pe *PeerError
	if errors.As(fault, &pe) {
		e := *pe
		e.Op = op
		return &e
	}
	return fmt.Errorf("%s: %w", op, fault)
}

// Rank is this process's rank.
func (c *tcpComm) Rank() int { return c.rank }

// Size is the number of ranks.
func (c *tcpComm) Size() int { return c.size }

// settle is how long a rank that timed out waits for the others that
// time out with it to record whom they waited for.
func (c *tcpComm) settle() time.Duration {
	return min(max(c.timeout/4, 20*time.Millisecond), 5*time.Second)
}

// direction of a stalled transfer.
const (
	waitRecv = "recv"
	waitSend = "send"
)

// faultFrom turns a transfer's error with peer into the job's fault,
// agreed through the store: the fault already recorded; a connection
// closed by peer; or a stall traced to its source.
func (c *tcpComm) faultFrom(ctx context.Context, op string, peer int, dir string, err error) error {
	if f := c.failed(); f != nil {
		return withOp(f, op)
	}
	if ctx.Err() != nil {
		// This rank leaves: the others will see its connections close.
		return withOp(c.abort(fmt.Errorf("this rank's call was cancelled: %w", ctx.Err())), op)
	}
	var mismatch *PeerError
	if errors.As(err, &mismatch) {
		return withOp(c.publish(mismatch), op)
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return withOp(c.publish(&PeerError{Rank: peer, Addr: c.addrs[peer], What: "closed its connection"}), op)
	}
	// A stall: record whom this rank waited for, let the other stalled
	// ranks record theirs, and follow the chain to the rank waiting for
	// nobody.
	sctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	mine := fmt.Sprintf("%d\t%s", peer, dir)
	if err := c.store.Set(sctx, "stuck/"+strconv.Itoa(c.rank), []byte(mine)); err != nil {
		return withOp(c.abort(c.stallFault(peer, dir)), op)
	}
	select {
	case <-time.After(c.settle()):
	case <-c.watchDone:
	}
	if f := c.failed(); f != nil {
		return withOp(f, op)
	}
	culprit, culpritDir := peer, dir
	seen := map[int]bool{c.rank: true}
	for cur := peer; ; {
		v, ok, err := c.store.TryGet(sctx, "stuck/"+strconv.Itoa(cur))
		if err != nil || !ok {
			break // cur waits for nobody: the source
		}
		p, d, _ := strings.Cut(string(v), "\t")
		next, err := strconv.Atoi(p)
		if err != nil || next < 0 || next >= c.size || seen[next] {
			culprit, culpritDir = peer, dir // a cycle: blame whom this rank waited for
			break
		}
		seen[next] = true
		cur, culprit, culpritDir = next, next, d
	}
	return withOp(c.publish(c.stallFault(culprit, culpritDir)), op)
}

func (c *tcpComm) stallFault(peer int, dir string) *PeerError {
	what := fmt.Sprintf("sent nothing for %v", c.timeout)
	if dir == waitSend {
		what = fmt.Sprintf("took nothing for %v", c.timeout)
	}
	return &PeerError{Rank: peer, Addr: c.addrs[peer], What: what}
}

// publish offers fault as the job's; the first one published wins and is
// recorded. When the store cannot be reached, rank 0 is the fault
// (storeGone).
func (c *tcpComm) publish(fault *PeerError) error {
	ctx, cancel := context.WithTimeout(context.Background(), min(c.timeout, 10*time.Second))
	defer cancel()
	v, err := c.store.setIfAbsent(ctx, abortKey, encodeFault(fault.Rank, fault.Addr, fault.What))
	if err != nil {
		return c.abort(c.storeGone())
	}
	return c.abort(decodeFault(v))
}

// chunkSize is how much a read or write moves between two renewals of its
// deadline: the timeout bounds a stall, not a whole large message.
const chunkSize = 1 << 20

// header is a message's: its call's kind, sequence number and length.
type header struct {
	kind byte
	seq  uint64
	n    uint64
}

func (h header) bytes() []byte {
	b := make([]byte, 17)
	b[0] = h.kind
	binary.LittleEndian.PutUint64(b[1:], h.seq)
	binary.LittleEndian.PutUint64(b[9:], h.n)
	return b
}

// send writes a message to the next rank.
func (c *tcpComm) send(h header, payload []byte) error {
	if err := c.writeAll(h.bytes()); err != nil {
		return err
	}
	return c.writeAll(payload)
}

func (c *tcpComm) writeAll(b []byte) error {
	for len(b) > 0 {
		n := min(len(b), chunkSize)
		c.next.SetWriteDeadline(time.Now().Add(c.timeout))
		if _, err := c.next.Write(b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// recv reads a message from the previous rank into dst, which must be its
// length, checking that it belongs to the same call.
func (c *tcpComm) recv(want header, dst []byte) error {
	var hb [17]byte
	if err := c.readFull(hb[:]); err != nil {
		return err
	}
	got := header{kind: hb[0], seq: binary.LittleEndian.Uint64(hb[1:]), n: binary.LittleEndian.Uint64(hb[9:])}
	if got != want {
		prev := (c.rank + c.size - 1) % c.size
		return &PeerError{Rank: prev, Addr: c.addrs[prev], What: fmt.Sprintf(
			"was in %s #%d with %d bytes while rank %d was in %s #%d with %d bytes (every rank must make the same calls)",
			kindName(got.kind), got.seq, got.n, c.rank, kindName(want.kind), want.seq, want.n)}
	}
	return c.readFull(dst)
}

func (c *tcpComm) readFull(b []byte) error {
	for len(b) > 0 {
		n := min(len(b), chunkSize)
		c.prev.SetReadDeadline(time.Now().Add(c.timeout))
		if _, err := io.ReadFull(c.prev, b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// exchange sends out (when doSend) to the next rank while it receives
// into in (when doRecv) from the previous one; an error is the job's
// fault, agreed through the store.
func (c *tcpComm) exchange(ctx context.Context, h header, out []byte, doSend bool, in []byte, doRecv bool) error {
	stop := context.AfterFunc(ctx, func() {
		c.next.SetDeadline(time.Unix(1, 0))
		c.prev.SetDeadline(time.Unix(1, 0))
	})
	defer stop()
	sent := make(chan error, 1)
	if doSend {
		go func() { sent <- c.send(header{h.kind, h.seq, uint64(len(out))}, out) }()
	} else {
		sent <- nil
	}
	var rerr error
	if doRecv {
		rerr = c.recv(header{h.kind, h.seq, uint64(len(in))}, in)
	}
	op := kindName(h.kind)
	if rerr != nil {
		// The fault closes the connections, which ends a send still
		// blocked (on a stalled next rank) without its own timeout.
		err := c.faultFrom(ctx, op, (c.rank+c.size-1)%c.size, waitRecv, rerr)
		<-sent
		return err
	}
	if serr := <-sent; serr != nil {
		return c.faultFrom(ctx, op, (c.rank+1)%c.size, waitSend, serr)
	}
	return nil
}

// begin starts a call: the job's fault if any, else its sequence number.
func (c *tcpComm) begin(ctx context.Context, kind byte) (uint64, error) {
	if f := c.failed(); f != nil {
		return 0, withOp(f, kindName(kind))
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", kindName(kind), err)
	}
	c.seq++
	return c.seq, nil
}

// AllReduceSum is the ring all-reduce (see the top of this file for its
// summation order).
func (c *tcpComm) AllReduceSum(ctx context.Context, buf []float32) error {
	return c.allReduce(ctx, kindAllReduce, buf)
}

func (c *tcpComm) allReduce(ctx context.Context, kind byte, buf []float32) error {
	seq, err := c.begin(ctx, kind)
	if err != nil {
		return err
	}
	n, L := c.size, len(buf)
	chunk := func(k int) []float32 {
		k = ((k % n) + n) % n
		return buf[int(int64(k)*int64(L)/int64(n)):int(int64(k+1)*int64(L)/int64(n))]
	}
	if need := L/n + 1; cap(c.scratch) < need {
		c.scratch = make([]float32, need)
	}
	h := header{kind: kind, seq: seq}
	// Reduce-scatter: at step s, rank r passes on chunk r−s and adds its
	// own values to chunk r−s−1's partial sum from rank r−1.
	for s := 0; s < n-1; s++ {
		out, dst := chunk(c.rank-s), chunk(c.rank-s-1)
		in := c.scratch[:len(dst)]
		if err := c.exchange(ctx, h, floatbytes.Bytes(out), true, floatbytes.Bytes(in), true); err != nil {
			return err
		}
		for i, v := range in {
			dst[i] = v + dst[i]
		}
	}
	// All-gather: rank r holds chunk r+1's sum and passes the sums on.
	for s := 0; s < n-1; s++ {
		if err := c.exchange(ctx, h, floatbytes.Bytes(chunk(c.rank+1-s)), true, floatbytes.Bytes(chunk(c.rank-s)), true); err != nil {
			return err
		}
	}
	return nil
}

// Broadcast passes root's buf around the ring.
func (c *tcpComm) Broadcast(ctx context.Context, buf []byte, root int) error {
	if root < 0 || root >= c.size {
		return fmt.Errorf("broadcast from rank %d in a job of %d ranks", root, c.size)
	}
	seq, err := c.begin(ctx, kindBroadcast)
	if err != nil {
		return err
	}
	d := (c.rank - root + c.size) % c.size // hops from root
	h := header{kind: kindBroadcast, seq: seq}
	if d > 0 {
		if err := c.exchange(ctx, h, nil, false, buf, true); err != nil {
			return err
		}
	}
	if d < c.size-1 {
		return c.exchange(ctx, h, buf, true, nil, false)
	}
	return nil
}

// Barrier is an all-reduce of one element per rank.
func (c *tcpComm) Barrier(ctx context.Context) error {
	buf := make([]float32, c.size)
	buf[c.rank] = 1
	if err := c.allReduce(ctx, kindBarrier, buf); err != nil {
		return err
	}
	for r, v := range buf {
		if v != 1 {
			return fmt.Errorf("barrier: rank %d's mark reads %v, not 1", r, v)
		}
	}
	return nil
}

// Close leaves the job: goodbye to the store (so leaving is no fault),
// then the connections; rank 0 first waits up to the timeout for the
// others to leave, since its store serves them.
func (c *tcpComm) Close() error {
	if c.closing.Swap(true) {
		return nil
	}
	if c.watch != nil {
		c.watch.bye()
	}
	c.closeAll()
	return nil
}

func (c *tcpComm) closeAll() {
	for _, cl := range []io.Closer{c.watch, c.next, c.prev, c.ln, c.store} {
		if cl != nil && !isNilCloser(cl) {
			cl.Close()
		}
	}
	if c.server != nil {
		c.server.WaitIdle(c.timeout)
		c.server.Close()
	}
	if c.watch != nil {
		select {
		case <-c.watchDone:
		case <-time.After(time.Second):
		}
	}
}

// isNilCloser tells a typed nil in an io.Closer.
func isNilCloser(cl io.Closer) bool {
	switch v := cl.(type) {
	case *Store:
		return v == nil
	case net.Conn:
		return v == nil
	case net.Listener:
		return v == nil
	}
	return false
}
