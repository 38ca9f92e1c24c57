package ccl

import (
	"errors"
	"fmt"
	"sync"
)

// fakeNet is NCCL over host memory for ranks that are goroutines of one
// process: each rank has its own fakeLib (as each process has its own
// libnccl), and they meet through the net as NCCL's ranks do through the
// unique id. It checks every call as NCCL does — an id that NCCL made,
// the same rank count on every rank, each rank once, no call on a freed
// communicator, a stream, and every rank's k-th all-reduce with the same
// count, type and operation (else the communicator's asynchronous error
// becomes ncclInvalidUsage, where NCCL would hang or corrupt) — and sums
// in rank order, in float32.
type fakeNet struct {
	mu      sync.Mutex
	ids     int
	cliques map[UniqueID]*clique
}

type clique struct {
	n       int
	joined  map[int]bool
	ready   chan struct{} // closed once n ranks have joined
	ops     []*fakeOp     // the k-th all-reduce of every rank
	misuse  string        // why the ranks' calls did not match
	aborted map[int]bool  // ranks that aborted
}

type fakeOp struct {
	count   int
	dt      DataType
	recv    map[int][]float32
	sends   map[int][]float32
	done    bool
	arrived int
}

func newFakeNet() *fakeNet { return &fakeNet{cliques: map[UniqueID]*clique{}} }

// fakeLib is one rank's NCCL.
type fakeLib struct {
	net *fakeNet

	// Guarded by net.mu.
	comms   map[Handle]*fakeComm
	handles Handle
	group   int      // ncclGroupStart depth
	queued  []func() // the group's all-reduces
	streams map[Stream][]*fakeOp
	groups  []int // all-reduces per launched group
	counts_ []int // each launched all-reduce's count, in launch order
	aborts  int
	destroy int
}

type fakeComm struct {
	cl    *clique
	rank  int
	seq   int
	freed bool
}

func (n *fakeNet) lib() *fakeLib {
	return &fakeLib{net: n, comms: map[Handle]*fakeComm{}, streams: map[Stream][]*fakeOp{}}
}

var _ Lib[[]float32] = (*fakeLib)(nil)

func (f *fakeLib) Version() (int, Result) { return 22105, Success }

func (f *fakeLib) UniqueID() (UniqueID, Result) {
	f.net.mu.Lock()
	defer f.net.mu.Unlock()
	f.net.ids++
	var id UniqueID
	copy(id[:], fmt.Sprintf("fake-nccl-id-%d", f.net.ids))
	f.net.cliques[id] = &clique{joined: map[int]bool{}, ready: make(chan struct{}), aborted: map[int]bool{}}
	return id, Success
}

func (f *fakeLib) CommInitRank(nranks int, id UniqueID, rank int) (Handle, Result) {
	f.net.mu.Lock()
	cl, ok := f.net.cliques[id]
	switch {
	case nranks < 1 || rank < 0 || rank >= nranks:
		f.net.mu.Unlock()
		return 0, InvalidArgument
	case !ok:
		f.net.mu.Unlock()
		return 0, InvalidArgument // not an id ncclGetUniqueId made
	case cl.n != 0 && cl.n != nranks, cl.joined[rank]:
		f.net.mu.Unlock()
		return 0, InvalidUsage
	}
	cl.n = nranks
	cl.joined[rank] = true
	if len(cl.joined) == nranks {
		close(cl.ready)
	}
	f.handles++
	h := f.handles
	f.comms[h] = &fakeComm{cl: cl, rank: rank}
	f.net.mu.Unlock()
	<-cl.ready // ncclCommInitRank returns once every rank has come
	return h, Success
}

// comm returns h's live communicator; net.mu is held.
func (f *fakeLib) comm(h Handle) (*fakeComm, Result) {
	c, ok := f.comms[h]
	if !ok {
		return nil, InvalidArgument
	}
	if c.freed {
		return nil, InvalidUsage // use after abort or destroy
	}
	return c, Success
}

func (f *fakeLib) AllReduce(send, recv []float32, count int, dt DataType, op RedOp, h Handle, s Stream) Result {
	f.net.mu.Lock()
	defer f.net.mu.Unlock()
	c, r := f.comm(h)
	switch {
	case r != Success:
		return r
	case s == 0, count < 0, count > len(send), count > len(recv), dt != Float32, op != Sum:
		return InvalidArgument
	}
	seq := c.seq
	c.seq++
	run := func() {
		cl := c.cl
		for len(cl.ops) <= seq {
			cl.ops = append(cl.ops, nil)
		}
		o := cl.ops[seq]
		if o == nil {
			o = &fakeOp{count: count, dt: dt, recv: map[int][]float32{}, sends: map[int][]float32{}}
			cl.ops[seq] = o
		}
		if o.count != count || o.dt != dt {
			cl.misuse = fmt.Sprintf("all-reduce #%d: rank %d has %d × %v, another rank %d × %v", seq, c.rank, count, dt, o.count, o.dt)
		}
		o.sends[c.rank] = append([]float32(nil), send[:count]...)
		o.recv[c.rank] = recv[:count]
		o.arrived++
		f.counts_ = append(f.counts_, count)
		f.streams[s] = append(f.streams[s], o)
		// An aborted rank's kernels are gone: nothing it was in completes.
		if o.arrived == cl.n && cl.misuse == "" && len(cl.aborted) == 0 {
			sum := make([]float32, count)
			for r := range cl.n {
				for i, v := range o.sends[r] {
					sum[i] += v
				}
			}
			for _, dst := range o.recv {
				copy(dst, sum)
			}
			o.done = true
		}
	}
	if f.group > 0 {
		f.queued = append(f.queued, run)
	} else {
		run()
		f.groups = append(f.groups, 1)
	}
	return Success
}

func (f *fakeLib) GroupStart() Result {
	f.net.mu.Lock()
	defer f.net.mu.Unlock()
	f.group++
	return Success
}

func (f *fakeLib) GroupEnd() Result {
	f.net.mu.Lock()
	defer f.net.mu.Unlock()
	if f.group == 0 {
		return InvalidUsage
	}
	if f.group--; f.group == 0 {
		for _, run := range f.queued {
			run()
		}
		f.groups = append(f.groups, len(f.queued))
		f.queued = nil
	}
	return Success
}

func (f *fakeLib) CommGetAsyncError(h Handle) (Result, Result) {
	f.net.mu.Lock()
	defer f.net.mu.Unlock()
	c, r := f.comm(h)
	if r != Success {
		return Success, r
	}
	if c.cl.misuse != "" {
		return InvalidUsage, Success
	}
	for q := range c.cl.aborted {
		if q != c.rank {
			return RemoteError, Success
		}
	}
	return Success, Success
}

func (f *fakeLib) CommAbort(h Handle) Result {
	f.net.mu.Lock()
	defer f.net.mu.Unlock()
	c, r := f.comm(h)
	if r != Success {
		return r
	}
	c.freed = true
	c.cl.aborted[c.rank] = true
	f.aborts++
	return Success
}

func (f *fakeLib) CommDestroy(h Handle) Result {
	f.net.mu.Lock()
	defer f.net.mu.Unlock()
	c, r := f.comm(h)
	if r != Success {
		return r
	}
	c.freed = true
	f.destroy++
	return Success
}

func (f *fakeLib) ErrorString(r Result) string {
	switch r {
	case InvalidUsage:
		return "invalid usage"
	case RemoteError:
		return "remote process exited or there was a network error"
	}
	return "fake error"
}

var errFakeStream = errors.New("CUDA_ERROR_INVALID_HANDLE")

func (f *fakeLib) StreamDone(s Stream) (bool, error) {
	f.net.mu.Lock()
	defer f.net.mu.Unlock()
	if s == 0 {
		return false, errFakeStream
	}
	for _, o := range f.streams[s] {
		if !o.done {
			return false, nil
		}
	}
	f.streams[s] = nil
	return true, nil
}

// launched returns each launched all-reduce's count, in launch order.
func (f *fakeLib) launched() []int {
	f.net.mu.Lock()
	defer f.net.mu.Unlock()
	return append([]int(nil), f.counts_...)
}

// counts returns the groups launched, aborts and destroys.
func (f *fakeLib) counts() (groups []int, aborts, destroys int) {
	f.net.mu.Lock()
	defer f.net.mu.Unlock()
	return append([]int(nil), f.groups...), f.aborts, f.destroy
}
