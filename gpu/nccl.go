//go:build cuda

package gpu

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cuda.h>

// NCCL is opened with dlopen at run time, as cuBLAS and cuDNN are: the
// binary runs without it (a single GPU needs none) and builds without
// nccl.h. The entry points are declared here from nccl.h, whose ABI has
// been stable since NCCL 2.0: ncclResult_t, ncclDataType_t and
// ncclRedOp_t are ints, ncclComm_t a pointer, ncclUniqueId a 128-byte
// struct passed by value, cudaStream_t the driver's CUstream. Pointers
// cross into Go as uintptr_t (C memory, never Go's).

typedef struct { char internal[128]; } vt_nccl_id;

typedef int (*vt_nccl_version_fn)(int *version);
typedef int (*vt_nccl_uid_fn)(vt_nccl_id *id);
typedef int (*vt_nccl_init_fn)(void **comm, int nranks, vt_nccl_id id, int rank);
typedef int (*vt_nccl_allreduce_fn)(const void *send, void *recv, size_t count, int datatype, int op, void *comm, CUstream stream);
typedef int (*vt_nccl_void_fn)(void);
typedef int (*vt_nccl_comm_fn)(void *comm);
typedef int (*vt_nccl_async_fn)(void *comm, int *state);
typedef const char *(*vt_nccl_errstr_fn)(int result);

static void *vt_nccl_dlopen(const char *path) { return dlopen(path, RTLD_NOW | RTLD_LOCAL); }
static const char *vt_nccl_dlerror(void)
{
	const char *e = dlerror();
	return e ? e : "unknown dlopen error";
}
static void *vt_nccl_dlsym(void *lib, const char *name) { return dlsym(lib, name); }
static int vt_nccl_dlclose(void *lib) { return dlclose(lib); }

static int vt_nccl_version(void *fn, int *v) { return ((vt_nccl_version_fn)fn)(v); }
static int vt_nccl_uid(void *fn, void *out)
{
	vt_nccl_id id;
	int r = ((vt_nccl_uid_fn)fn)(&id);
	memcpy(out, id.internal, sizeof id.internal);
	return r;
}
static int vt_nccl_init(void *fn, uintptr_t *comm, int nranks, const void *idBytes, int rank)
{
	vt_nccl_id id;
	void *c = NULL;
	memcpy(id.internal, idBytes, sizeof id.internal);
	int r = ((vt_nccl_init_fn)fn)(&c, nranks, id, rank);
	*comm = (uintptr_t)c;
	return r;
}
static int vt_nccl_allreduce(void *fn, uintptr_t send, uintptr_t recv, size_t count, int dt, int op, uintptr_t comm, uintptr_t stream)
{
	return ((vt_nccl_allreduce_fn)fn)((const void *)send, (void *)recv, count, dt, op, (void *)comm, (CUstream)stream);
}
static int vt_nccl_void(void *fn) { return ((vt_nccl_void_fn)fn)(); }
static int vt_nccl_comm(void *fn, uintptr_t comm) { return ((vt_nccl_comm_fn)fn)((void *)comm); }
static int vt_nccl_async(void *fn, uintptr_t comm, int *state) { return ((vt_nccl_async_fn)fn)((void *)comm, state); }
static const char *vt_nccl_errstr(void *fn, int r) { return ((vt_nccl_errstr_fn)fn)(r); }
static int vt_stream_query(uintptr_t stream) { return (int)cuStreamQuery((CUstream)stream); }
static uintptr_t vt_stream_handle(CUstream s) { return (uintptr_t)s; }
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"unsafe"

	"github.com/voxtrain/voxtrain/dist"
	"github.com/voxtrain/voxtrain/gpu/internal/ccl"
	"github.com/voxtrain/voxtrain/nn"
	"gorgonia.org/cu"
)

// NCCLEnv names the environment variable with extra places to find NCCL
// (libnccl.so.2): a colon-separated list of library files and
// directories, tried before LD_LIBRARY_PATH and the system's search.
// PyTorch's wheels carry it in site-packages/nvidia/nccl/lib.
const NCCLEnv = "VOXTRAIN_NCCL"

var ncclSonames = []string{"libnccl.so.2"}

// NCCLAvailable reports whether NCCL loads on this node (nil), or why not
// (where it looked): every rank of a job asks before any joins, so that
// all use NCCL or none does.
func (d *Device) NCCLAvailable() error {
	_, err := d.loadNCCL()
	return err
}

// loadNCCL opens NCCL once for the device's life (never closed: a
// library NCCL's threads run in cannot be unloaded safely).
func (d *Device) loadNCCL() (*ncclLib, error) {
	d.ncclOnce.Do(func() { d.nccl, d.ncclErr = openNCCL(d) })
	return d.nccl, d.ncclErr
}

// ncclLib is NCCL opened with dlopen: ccl.Lib on the device's thread.
type ncclLib struct {
	d    *Device
	path string
	lib  unsafe.Pointer

	version, uid, initRank, allReduce, groupStart, groupEnd, asyncErr, abort, destroy, errStr unsafe.Pointer
}

var _ ccl.Lib[cu.DevicePtr] = (*ncclLib)(nil)

// openNCCL finds and opens NCCL (see libpath.Candidates, NCCLEnv); the
// error names every candidate that failed, or says where it looked.
func openNCCL(d *Device) (*ncclLib, error) {
	return openFirst("NCCL", ncclSonames, NCCLEnv, "PyTorch's wheels have it in site-packages/nvidia/nccl/lib", func(p string) (*ncclLib, error) {
		var l *ncclLib
		err := d.thread.do(func() error {
			var err error
			l, err = tryNCCL(d, p)
			return err
		})
		return l, err
	})
}

func tryNCCL(d *Device, path string) (*ncclLib, error) {
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	lib := C.vt_nccl_dlopen(cp)
	if lib == nil {
		return nil, fmt.Errorf("%s: %w: %s", path, errNoLib, C.GoString(C.vt_nccl_dlerror()))
	}
	l := &ncclLib{d: d, path: path, lib: lib}
	for _, s := range []struct {
		name string
		fn   *unsafe.Pointer
	}{
		{"ncclGetVersion", &l.version}, {"ncclGetUniqueId", &l.uid}, {"ncclCommInitRank", &l.initRank},
		{"ncclAllReduce", &l.allReduce}, {"ncclGroupStart", &l.groupStart}, {"ncclGroupEnd", &l.groupEnd},
		{"ncclCommGetAsyncError", &l.asyncErr}, {"ncclCommAbort", &l.abort}, {"ncclCommDestroy", &l.destroy},
		{"ncclGetErrorString", &l.errStr},
	} {
		cs := C.CString(s.name)
		*s.fn = C.vt_nccl_dlsym(lib, cs)
		C.free(unsafe.Pointer(cs))
		if *s.fn == nil {
			C.vt_nccl_dlclose(lib)
			return nil, fmt.Errorf("%s: no %s", path, s.name)
		}
	}
	return l, nil
}

// on runs f on the device's thread (the context current, as NCCL's
// runtime calls need) and returns its result; a closed device answers
// ncclInvalidUsage.
func (l *ncclLib) on(f func() ccl.Result) ccl.Result {
	r := ccl.InvalidUsage
	if err := l.d.thread.do(func() error { r = f(); return nil }); err != nil {
		return ccl.InvalidUsage
	}
	return r
}

func (l *ncclLib) Version() (int, ccl.Result) {
	var v C.int
	r := l.on(func() ccl.Result { return ccl.Result(C.vt_nccl_version(l.version, &v)) })
	return int(v), r
}

func (l *ncclLib) UniqueID() (ccl.UniqueID, ccl.Result) {
	var id ccl.UniqueID
	buf := C.malloc(C.size_t(len(id)))
	defer C.free(buf)
	r := l.on(func() ccl.Result { return ccl.Result(C.vt_nccl_uid(l.uid, buf)) })
	copy(id[:], C.GoBytes(buf, C.int(len(id))))
	return id, r
}

func (l *ncclLib) CommInitRank(nranks int, id ccl.UniqueID, rank int) (ccl.Handle, ccl.Result) {
	buf := C.CBytes(id[:])
	defer C.free(buf)
	var h C.uintptr_t
	r := l.on(func() ccl.Result {
		return ccl.Result(C.vt_nccl_init(l.initRank, &h, C.int(nranks), buf, C.int(rank)))
	})
	return ccl.Handle(h), r
}

func (l *ncclLib) AllReduce(send, recv cu.DevicePtr, count int, dt ccl.DataType, op ccl.RedOp, comm ccl.Handle, s ccl.Stream) ccl.Result {
	return l.on(func() ccl.Result {
		return ccl.Result(C.vt_nccl_allreduce(l.allReduce, C.uintptr_t(send), C.uintptr_t(recv), C.size_t(count),
			C.int(dt), C.int(op), C.uintptr_t(comm), C.uintptr_t(s)))
	})
}

func (l *ncclLib) GroupStart() ccl.Result {
	return l.on(func() ccl.Result { return ccl.Result(C.vt_nccl_void(l.groupStart)) })
}

func (l *ncclLib) GroupEnd() ccl.Result {
	return l.on(func() ccl.Result { return ccl.Result(C.vt_nccl_void(l.groupEnd)) })
}

func (l *ncclLib) CommGetAsyncError(comm ccl.Handle) (ccl.Result, ccl.Result) {
	var st C.int
	r := l.on(func() ccl.Result { return ccl.Result(C.vt_nccl_async(l.asyncErr, C.uintptr_t(comm), &st)) })
	return ccl.Result(st), r
}

func (l *ncclLib) CommAbort(comm ccl.Handle) ccl.Result {
	return l.on(func() ccl.Result { return ccl.Result(C.vt_nccl_comm(l.abort, C.uintptr_t(comm))) })
}

func (l *ncclLib) CommDestroy(comm ccl.Handle) ccl.Result {
	return l.on(func() ccl.Result { return ccl.Result(C.vt_nccl_comm(l.destroy, C.uintptr_t(comm))) })
}

// ErrorString is ncclGetErrorString; it needs no context.
func (l *ncclLib) ErrorString(r ccl.Result) string {
	return C.GoString(C.vt_nccl_errstr(l.errStr, C.int(r)))
}

// StreamDone is cuStreamQuery on the device's thread.
func (l *ncclLib) StreamDone(s ccl.Stream) (bool, error) {
	done := false
	err := l.d.thread.do(func() error {
		switch r := C.vt_stream_query(C.uintptr_t(s)); r {
		case 0: // CUDA_SUCCESS
			done = true
		case 600: // CUDA_ERROR_NOT_READY
		default:
			return fmt.Errorf("cuStreamQuery(nccl): CUresult %d", int(r))
		}
		return nil
	})
	return done, err
}

// NCCLComm is a data-parallel job's communicator on a CUDA device: the
// gradients' all-reduce (ReduceMean) runs on device memory with NCCL, on
// its own stream; every other call (the step's stop flag and loss, the
// validation's sums, barriers, broadcasts) goes to the job's CPU
// communicator over TCP, which holds small host values and names a rank
// that dies.
type NCCLComm struct {
	dist.Comm // the scalars' communicator
	d         *Device
	lib       *ncclLib
	ccl       *ccl.Comm[cu.DevicePtr]
	stream    *Stream
	ptrs      []cu.DevicePtr
	lens      []int
}

// JoinNCCL makes the device's NCCL communicator for env's job, whose CPU
// communicator scalars already joined (dist.Init; dist.Single for a job
// of one process, which then needs no store): rank 0 publishes NCCL's
// unique id in the job's store at env.Addr(), and the others fetch it
// there, within opts.JoinTimeout. An all-reduce that makes no progress
// for opts.Timeout aborts the communicator; so does a fault the CPU
// communicator reports meanwhile (its rank named). Closing the result
// closes scalars too.
func (d *Device) JoinNCCL(ctx context.Context, scalars dist.Comm, env dist.Env, opts dist.Options) (dist.Comm, error) {
	lib, err := d.loadNCCL()
	if err != nil {
		return nil, err
	}
	st, err := d.newStream("nccl")
	if err != nil {
		return nil, err
	}
	co := ccl.Options{JoinTimeout: opts.JoinTimeout, Timeout: opts.Timeout}
	if f, ok := scalars.(interface{ Fault() error }); ok {
		co.Fault = f.Fault
	}
	var store ccl.Store
	if env.WorldSize > 1 {
		jt := opts.JoinTimeout
		if jt <= 0 {
			jt = dist.DefaultJoinTimeout
		}
		s, err := dist.Dial(ctx, env.Addr(), env.Rank, env.WorldSize, jt)
		if err != nil {
			return nil, err
		}
		defer s.Close() // needed for the rendezvous only
		store = s
	}
	size := max(1, env.WorldSize)
	c, err := ccl.Init[cu.DevicePtr](ctx, lib, store, env.Rank, size, ccl.Stream(C.vt_stream_handle(C.CUstream(unsafe.Pointer(st.cuStream.C())))), co)
	if err != nil {
		return nil, fmt.Errorf("%w (NCCL at %s)", err, lib.path)
	}
	return &NCCLComm{Comm: scalars, d: d, lib: lib, ccl: c, stream: st}, nil
}

// NCCLVersion is the NCCL library's version and path.
func (n *NCCLComm) NCCLVersion() string { return n.ccl.Version() + " (" + n.lib.path + ")" }

// ReduceMean replaces every gradient by its mean over the ranks, in
// device memory: the NCCL stream waits for the work issued to the compute
// stream so far (the backward pass), the buckets are all-reduced there
// (ccl.Comm.AllReduceSum, whose watchdog waits for them), and the compute
// stream waits for the NCCL stream before it scales them by 1/N and runs
// the optimiser step. NewGradSync overlaps the same reduction with the
// backward pass; this is the path with VOXTRAIN_DIST_OVERLAP=0.
func (n *NCCLComm) ReduceMean(grads []nn.Tensor) error {
	n.ptrs, n.lens = n.ptrs[:0], n.lens[:0]
	for _, g := range grads {
		t := n.d.core.Tensor(g)
		n.ptrs = append(n.ptrs, t.Ptr())
		n.lens = append(n.lens, t.Len())
	}
	n.stream.Wait(n.d.compute.Record())
	ordered := false
	order := func() {
		if !ordered {
			n.d.compute.Wait(n.stream.Record())
			ordered = true
		}
	}
	err := n.ccl.AllReduceMean(context.Background(), n.ptrs, n.lens, func(i int, alpha float32) error {
		order()
		n.d.Scale(grads[i], alpha)
		return nil
	})
	order()
	return err
}

// NewGradSync returns the overlapped reduction of params' gradients, for
// nn.Learner.Sync: the buckets and sums of ReduceMean, each bucket's group
// launched on the NCCL stream as soon as the backward pass has issued its
// gradients' ops — after an event recorded on the compute stream at that
// point, which the NCCL stream waits for — so NCCL's kernels run while
// the compute stream goes on with the rest of the pass. Finish makes the
// compute stream wait for the NCCL stream before it scales the sums by
// 1/N (and before the optimiser step); the watchdog (ccl.Comm's wait)
// bounds the wait as ReduceMean's does.
func (n *NCCLComm) NewGradSync(params []*nn.Param) (nn.GradSync, error) {
	s := &ncclSync{n: n, index: make(map[*nn.Param]int, len(params))}
	var ptrs []cu.DevicePtr
	var lens []int
	for i, p := range params {
		t := n.d.core.Tensor(p.G)
		ptrs = append(ptrs, t.Ptr())
		lens = append(lens, t.Len())
		s.grads = append(s.grads, p.G)
		s.index[p] = i
	}
	ov, err := n.ccl.NewOverlap(ptrs, lens, func() error {
		n.stream.Wait(n.d.compute.Record())
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.ov = ov
	return s, nil
}

// ncclSync is NCCLComm's nn.GradSync (NewGradSync).
type ncclSync struct {
	n      *NCCLComm
	ov     *ccl.Overlap[cu.DevicePtr]
	index  map[*nn.Param]int
	grads  []nn.Tensor
	misuse error
}

func (s *ncclSync) Begin() {
	s.misuse = nil
	s.ov.Begin()
}

func (s *ncclSync) Ready(params []*nn.Param) {
	for _, p := range params {
		i, ok := s.index[p]
		if !ok {
			if s.misuse == nil {
				s.misuse = fmt.Errorf("gradient of %s reported ready: not one of the model's parameters", p.Name)
			}
			continue
		}
		s.ov.Ready(i)
	}
}

func (s *ncclSync) Finish() error {
	ordered := false
	order := func() {
		if !ordered {
			s.n.d.compute.Wait(s.n.stream.Record())
			ordered = true
		}
	}
	err := s.ov.Finish(context.Background(), func(i int, alpha float32) error {
		order()
		s.n.d.Scale(s.grads[i], alpha)
		return nil
	})
	order()
	if err == nil {
		err = s.misuse
	}
	return err
}

// Close frees the NCCL communicator, then closes the CPU one.
func (n *NCCLComm) Close() error {
	err := n.ccl.Close()
	return errors.Join(err, n.Comm.Close())
}
