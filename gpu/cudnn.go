//go:build cuda

package gpu

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <cuda.h>

// cuDNN is opened with dlopen at run time like cuBLAS (see cublas.go): the
// binary links only the driver and builds without cuDNN's headers. The
// legacy Nd convolution API is declared here; cuDNN 8 and 9 export it
// with these signatures. Enums and cudnnStatus_t are ints, descriptors
// and the handle pointers, cudaStream_t the driver's CUstream.

typedef int (*vt_dnn_create_fn)(void **h);
typedef int (*vt_dnn_destroy_fn)(void *h);
typedef int (*vt_dnn_set_stream_fn)(void *h, CUstream s);
typedef size_t (*vt_dnn_get_version_fn)(void);
typedef const char *(*vt_dnn_error_string_fn)(int status);
typedef int (*vt_dnn_set_tensor_fn)(void *d, int dataType, int nbDims, const int *dims, const int *strides);
typedef int (*vt_dnn_set_filter_fn)(void *d, int dataType, int format, int nbDims, const int *dims);
typedef int (*vt_dnn_set_conv_fn)(void *d, int n, const int *pad, const int *stride, const int *dilation, int mode, int computeType);
typedef int (*vt_dnn_set_math_fn)(void *d, int mathType);

// cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t share this layout.
typedef struct {
	int algo;
	int status;
	float time;
	size_t memory;
	int determinism;
	int mathType;
	int reserved[3];
} vt_dnn_perf;

// The three Find*AlgorithmEx share one shape: handle, (desc, ptr) ×2,
// convolution, (desc, ptr), requested, returned, results, workspace.
typedef int (*vt_dnn_find_fn)(void *h, void *d1, const void *p1, void *d2, const void *p2, void *conv,
                              void *d3, void *p3, int requested, int *returned, vt_dnn_perf *perf,
                              void *ws, size_t wsBytes);
// The three Get*WorkspaceSize: handle, desc ×2, convolution, desc, algo, size.
typedef int (*vt_dnn_ws_fn)(void *h, void *d1, void *d2, void *conv, void *d3, int algo, size_t *size);
// The three passes: handle, alpha, (desc, ptr) ×2, convolution, algo,
// workspace, beta, (desc, ptr).
typedef int (*vt_dnn_run_fn)(void *h, const void *alpha, void *d1, const void *p1, void *d2, const void *p2,
                             void *conv, int algo, void *ws, size_t wsBytes, const void *beta, void *d3, void *p3);

static void *vt_dnn_dlopen(const char *path) { return dlopen(path, RTLD_NOW | RTLD_LOCAL); }
static const char *vt_dnn_dlerror(void) { const char *e = dlerror(); return e ? e : "unknown dlopen error"; }
static void *vt_dnn_dlsym(void *lib, const char *name) { return dlsym(lib, name); }
static int vt_dnn_dlclose(void *lib) { return dlclose(lib); }

static int vt_dnn_create(void *fn, void **h) { return ((vt_dnn_create_fn)fn)(h); }
static int vt_dnn_destroy(void *fn, void *h) { return ((vt_dnn_destroy_fn)fn)(h); }
static int vt_dnn_set_stream(void *fn, void *h, CUstream s) { return ((vt_dnn_set_stream_fn)fn)(h, s); }
static size_t vt_dnn_get_version(void *fn) { return ((vt_dnn_get_version_fn)fn)(); }
static const char *vt_dnn_error_string(void *fn, int s) { return ((vt_dnn_error_string_fn)fn)(s); }
static int vt_dnn_set_tensor(void *fn, void *d, int dt, const int *dims, const int *strides)
{
	return ((vt_dnn_set_tensor_fn)fn)(d, dt, 5, dims, strides);
}
static int vt_dnn_set_filter(void *fn, void *d, int dt, int format, const int *dims)
{
	return ((vt_dnn_set_filter_fn)fn)(d, dt, format, 5, dims);
}
static int vt_dnn_set_conv(void *fn, void *d, const int *pad, const int *stride, const int *dil, int mode, int compute)
{
	return ((vt_dnn_set_conv_fn)fn)(d, 3, pad, stride, dil, mode, compute);
}
static int vt_dnn_set_math(void *fn, void *d, int m) { return ((vt_dnn_set_math_fn)fn)(d, m); }
static int vt_dnn_find(void *fn, void *h, void *d1, CUdeviceptr p1, void *d2, CUdeviceptr p2, void *conv,
                       void *d3, CUdeviceptr p3, int requested, int *returned, vt_dnn_perf *perf,
                       CUdeviceptr ws, size_t wsBytes)
{
	return ((vt_dnn_find_fn)fn)(h, d1, (const void *)p1, d2, (const void *)p2, conv, d3, (void *)p3,
	                            requested, returned, perf, (void *)ws, wsBytes);
}
static int vt_dnn_ws(void *fn, void *h, void *d1, void *d2, void *conv, void *d3, int algo, size_t *size)
{
	return ((vt_dnn_ws_fn)fn)(h, d1, d2, conv, d3, algo, size);
}
// alpha = 1 and beta as given (float scaling for float and bf16 data).
static int vt_dnn_run(void *fn, void *h, void *d1, CUdeviceptr p1, void *d2, CUdeviceptr p2, void *conv, int algo,
                      CUdeviceptr ws, size_t wsBytes, float beta, void *d3, CUdeviceptr p3)
{
	float alpha = 1;
	return ((vt_dnn_run_fn)fn)(h, &alpha, d1, (const void *)p1, d2, (const void *)p2, conv, algo,
	                           (void *)ws, wsBytes, &beta, d3, (void *)p3);
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/voxtrain/voxtrain/gpu/internal/dnn"
	"gorgonia.org/cu"
)

// cudnnSonames are the cuDNN libraries tried, newest first.
var cudnnSonames = []string{"libcudnn.so.9", "libcudnn.so.8"}

// CuDNNEnv names the environment variable with extra places to find
// cuDNN (files and directories, colon-separated), tried before
// LD_LIBRARY_PATH and the system's search.
const CuDNNEnv = "VOXTRAIN_CUDNN"

// cudnn is an open cuDNN with one handle on the compute stream; it
// implements dnn.Lib for the device's memory. Its C calls run on the
// device's thread: Find and WorkspaceSize wait for their answer, Run is
// queued like a kernel launch.
type cudnn struct {
	d       *Device
	path    string
	version string
	lib     unsafe.Pointer
	handle  unsafe.Pointer

	create, destroy, setStream, getVersion, errorString                unsafe.Pointer
	createTensor, setTensor, destroyTensor                             unsafe.Pointer
	createFilter, setFilter, destroyFilter                             unsafe.Pointer
	createConv, setConv, setMathFn, destroyConv                        unsafe.Pointer
	findFwd, findBwdData, findBwdFilter, wsFwd, wsBwdData, wsBwdFilter unsafe.Pointer
	runFwd, runBwdData, runBwdFilter                                   unsafe.Pointer

	descs map[dnn.Problem]*cudnnDescs // on the thread only
}

// cudnnDescs are the descriptors of one dnn.Problem.
type cudnnDescs struct{ x, y, w, conv unsafe.Pointer }

var _ dnn.Lib[cu.DevicePtr] = (*cudnn)(nil)

// openCuDNN finds, opens and initialises cuDNN (on the device's thread),
// trying each candidate until one loads, has every entry point and
// creates a handle. The error names every candidate that failed, or says
// where it looked.
func openCuDNN(d *Device) (*cudnn, error) {
	return openFirst("cuDNN", cudnnSonames, CuDNNEnv, "", func(p string) (*cudnn, error) {
		var l *cudnn
		err := d.thread.do(func() error {
			var err error
			l, err = tryCuDNN(d, p)
			return err
		})
		return l, err
	})
}

func tryCuDNN(d *Device, path string) (*cudnn, error) {
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	lib := C.vt_dnn_dlopen(cp)
	if lib == nil {
		return nil, fmt.Errorf("%s: %w: %s", path, errNoLib, C.GoString(C.vt_dnn_dlerror()))
	}
	l := &cudnn{d: d, path: path, lib: lib, descs: map[dnn.Problem]*cudnnDescs{}}
	fail := func(err error) (*cudnn, error) {
		if l.handle != nil {
			C.vt_dnn_destroy(l.destroy, l.handle)
		}
		C.vt_dnn_dlclose(lib)
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, s := range []struct {
		name string
		fn   *unsafe.Pointer
	}{
		{"cudnnCreate", &l.create}, {"cudnnDestroy", &l.destroy}, {"cudnnSetStream", &l.setStream},
		{"cudnnGetVersion", &l.getVersion}, {"cudnnGetErrorString", &l.errorString},
		{"cudnnCreateTensorDescriptor", &l.createTensor}, {"cudnnSetTensorNdDescriptor", &l.setTensor},
		{"cudnnDestroyTensorDescriptor", &l.destroyTensor},
		{"cudnnCreateFilterDescriptor", &l.createFilter}, {"cudnnSetFilterNdDescriptor", &l.setFilter},
		{"cudnnDestroyFilterDescriptor", &l.destroyFilter},
		{"cudnnCreateConvolutionDescriptor", &l.createConv}, {"cudnnSetConvolutionNdDescriptor", &l.setConv},
		{"cudnnSetConvolutionMathType", &l.setMathFn}, {"cudnnDestroyConvolutionDescriptor", &l.destroyConv},
		{"cudnnFindConvolutionForwardAlgorithmEx", &l.findFwd},
		{"cudnnFindConvolutionBackwardDataAlgorithmEx", &l.findBwdData},
		{"cudnnFindConvolutionBackwardFilterAlgorithmEx", &l.findBwdFilter},
		{"cudnnGetConvolutionForwardWorkspaceSize", &l.wsFwd},
		{"cudnnGetConvolutionBackwardDataWorkspaceSize", &l.wsBwdData},
		{"cudnnGetConvolutionBackwardFilterWorkspaceSize", &l.wsBwdFilter},
		{"cudnnConvolutionForward", &l.runFwd}, {"cudnnConvolutionBackwardData", &l.runBwdData},
		{"cudnnConvolutionBackwardFilter", &l.runBwdFilter},
	} {
		cn := C.CString(s.name)
		*s.fn = C.vt_dnn_dlsym(lib, cn)
		C.free(unsafe.Pointer(cn))
		if *s.fn == nil {
			return fail(fmt.Errorf("no symbol %s", s.name))
		}
	}
	v := int(C.vt_dnn_get_version(l.getVersion))
	l.version = cudnnVersion(v)
	var h unsafe.Pointer
	if st := C.vt_dnn_create(l.create, &h); st != 0 {
		return fail(l.err("cudnnCreate", st))
	}
	l.handle = h
	if st := C.vt_dnn_set_stream(l.setStream, h, C.CUstream(unsafe.Pointer(d.compute.cuStream.C()))); st != 0 {
		return fail(l.err("cudnnSetStream", st))
	}
	return l, nil
}

// cudnnVersion formats cudnnGetVersion's number: major·10000 + minor·100
// + patch from cuDNN 9 (91900 is 9.19.0), major·1000 + minor·100 + patch
// before (8902 is 8.9.2).
func cudnnVersion(v int) string {
	if v >= 90000 {
		return fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100)
	}
	return fmt.Sprintf("%d.%d.%d", v/1000, v/100%10, v%100)
}

// err turns a cudnnStatus_t into an error naming the call and the status
// as cuDNN names it.
func (l *cudnn) err(call string, st C.int) error {
	if st == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s (status %d)", call, C.GoString(C.vt_dnn_error_string(l.errorString, st)), int(st))
}

// Version returns cuDNN's version, "9.19.0".
func (l *cudnn) Version() string { return l.version }

// problemDescs returns p's descriptors, creating them at first use (on
// the thread).
func (l *cudnn) problemDescs(p *dnn.Problem) (*cudnnDescs, error) {
	if ds, ok := l.descs[*p]; ok {
		return ds, nil
	}
	ds := &cudnnDescs{}
	fail := func(err error) (*cudnnDescs, error) {
		l.destroyDescs(ds)
		return nil, err
	}
	tensor := func(t dnn.Tensor, out *unsafe.Pointer, name string) error {
		if st := C.vt_dnn_create(l.createTensor, out); st != 0 {
			return l.err("cudnnCreateTensorDescriptor", st)
		}
		dims := [5]C.int{}
		strides := [5]C.int{}
		for i := range dims {
			dims[i], strides[i] = C.int(t.Dims[i]), C.int(t.Strides[i])
		}
		return l.err(fmt.Sprintf("cudnnSetTensorNdDescriptor(%s: %s, dims %v, strides %v)", name, t.Type, t.Dims, t.Strides),
			C.vt_dnn_set_tensor(l.setTensor, *out, C.int(t.Type), &dims[0], &strides[0]))
	}
	if err := tensor(p.X, &ds.x, "x"); err != nil {
		return fail(err)
	}
	if err := tensor(p.Y, &ds.y, "y"); err != nil {
		return fail(err)
	}
	if st := C.vt_dnn_create(l.createFilter, &ds.w); st != 0 {
		return fail(l.err("cudnnCreateFilterDescriptor", st))
	}
	fd := [5]C.int{}
	for i := range fd {
		fd[i] = C.int(p.W.Dims[i])
	}
	if st := C.vt_dnn_set_filter(l.setFilter, ds.w, C.int(p.W.Type), C.int(p.W.Format), &fd[0]); st != 0 {
		return fail(l.err(fmt.Sprintf("cudnnSetFilterNdDescriptor(%s, NHWC, %v)", p.W.Type, p.W.Dims), st))
	}
	if st := C.vt_dnn_create(l.createConv, &ds.conv); st != 0 {
		return fail(l.err("cudnnCreateConvolutionDescriptor", st))
	}
	var pad, stride, dil [3]C.int
	for i := 0; i < 3; i++ {
		pad[i], stride[i], dil[i] = C.int(p.Conv.Pad[i]), C.int(p.Conv.Stride[i]), C.int(p.Conv.Dilation[i])
	}
	if st := C.vt_dnn_set_conv(l.setConv, ds.conv, &pad[0], &stride[0], &dil[0], C.int(p.Conv.Mode), C.int(p.Conv.Compute)); st != 0 {
		return fail(l.err(fmt.Sprintf("cudnnSetConvolutionNdDescriptor(pad %v, stride %v)", p.Conv.Pad, p.Conv.Stride), st))
	}
	if err := l.setMath(ds, p.Conv.Math); err != nil {
		return fail(err)
	}
	l.descs[*p] = ds
	return ds, nil
}

func (l *cudnn) destroyDescs(ds *cudnnDescs) {
	if ds.x != nil {
		C.vt_dnn_destroy(l.destroyTensor, ds.x)
	}
	if ds.y != nil {
		C.vt_dnn_destroy(l.destroyTensor, ds.y)
	}
	if ds.w != nil {
		C.vt_dnn_destroy(l.destroyFilter, ds.w)
	}
	if ds.conv != nil {
		C.vt_dnn_destroy(l.destroyConv, ds.conv)
	}
}

// order returns pass k's function pointers and its descriptors and
// pointers in cuDNN's argument order: (d1, p1), (d2, p2), (d3, p3), the
// last being the output.
func (l *cudnn) order(k dnn.Kind, ds *cudnnDescs, x, w, y cu.DevicePtr) (find, ws, run unsafe.Pointer, d [3]unsafe.Pointer, p [3]cu.DevicePtr) {
	switch k {
	case dnn.Forward:
		return l.findFwd, l.wsFwd, l.runFwd, [3]unsafe.Pointer{ds.x, ds.w, ds.y}, [3]cu.DevicePtr{x, w, y}
	case dnn.BackwardData:
		return l.findBwdData, l.wsBwdData, l.runBwdData, [3]unsafe.Pointer{ds.w, ds.y, ds.x}, [3]cu.DevicePtr{w, y, x}
	default:
		return l.findBwdFilter, l.wsBwdFilter, l.runBwdFilter, [3]unsafe.Pointer{ds.x, ds.y, ds.w}, [3]cu.DevicePtr{x, y, w}
	}
}

// maxAlgos bounds the results asked of Find (cuDNN 9 has 8 forward, 6
// backward-data and 7 backward-filter algorithms).
const maxAlgos = 16

// Find runs cudnnFind*AlgorithmEx for pass k of p on the thread, after
// the work queued before it.
func (l *cudnn) Find(k dnn.Kind, p *dnn.Problem, x, w, y, ws cu.DevicePtr, wsBytes int) ([]dnn.Perf, error) {
	var out []dnn.Perf
	err := l.d.thread.do(func() error {
		ds, err := l.problemDescs(p)
		if err != nil {
			return err
		}
		// Find times with the problem's own math type (a Run may have
		// left another on the descriptor).
		if err := l.setMath(ds, p.Conv.Math); err != nil {
			return err
		}
		find, _, _, d, ptr := l.order(k, ds, x, w, y)
		var perf [maxAlgos]C.vt_dnn_perf
		var n C.int
		st := C.vt_dnn_find(find, l.handle, d[0], C.CUdeviceptr(ptr[0]), d[1], C.CUdeviceptr(ptr[1]), ds.conv,
			d[2], C.CUdeviceptr(ptr[2]), maxAlgos, &n, &perf[0], C.CUdeviceptr(ws), C.size_t(wsBytes))
		if st != 0 {
			return l.err(fmt.Sprintf("cudnnFind (%s)", k), st)
		}
		for _, pf := range perf[:int(n)] {
			out = append(out, dnn.Perf{Algo: int32(pf.algo), Status: int32(pf.status), TimeMs: float32(pf.time),
				Memory: int64(pf.memory), Deterministic: pf.determinism == 1, Math: dnn.MathType(pf.mathType)})
		}
		return nil
	})
	return out, wrapAsync(err)
}

// setMath sets the convolution descriptor's math type: the one an
// algorithm was timed with must be set before it runs (cuDNN answers
// CUDNN_STATUS_BAD_PARAM otherwise; PyTorch does the same).
func (l *cudnn) setMath(ds *cudnnDescs, m dnn.MathType) error {
	return l.err(fmt.Sprintf("cudnnSetConvolutionMathType(%d)", m), C.vt_dnn_set_math(l.setMathFn, ds.conv, C.int(m)))
}

// WorkspaceSize runs cudnnGet*WorkspaceSize on the thread.
func (l *cudnn) WorkspaceSize(k dnn.Kind, p *dnn.Problem, algo int32, m dnn.MathType) (int, error) {
	var size C.size_t
	err := l.d.thread.do(func() error {
		ds, err := l.problemDescs(p)
		if err != nil {
			return err
		}
		if err := l.setMath(ds, m); err != nil {
			return err
		}
		_, wsFn, _, d, _ := l.order(k, ds, 0, 0, 0)
		return l.err(fmt.Sprintf("cudnnGetWorkspaceSize (%s, algorithm %d)", k, algo),
			C.vt_dnn_ws(wsFn, l.handle, d[0], d[1], ds.conv, d[2], C.int(algo), &size))
	})
	return int(size), err
}

// Run queues pass k of p on the compute stream.
func (l *cudnn) Run(k dnn.Kind, p *dnn.Problem, algo int32, m dnn.MathType, beta float32, x, w, y, ws cu.DevicePtr, wsBytes int) error {
	d := l.d
	op := d.curOp()
	pc := *p
	d.thread.post(func() string { return fmt.Sprintf("gpu.%s: cuDNN %s of %s (algorithm %d)", op, k, &pc, algo) }, func() error {
		ds, err := l.problemDescs(&pc)
		if err != nil {
			return err
		}
		if err := l.setMath(ds, m); err != nil {
			return err
		}
		_, _, run, dd, ptr := l.order(k, ds, x, w, y)
		st := C.vt_dnn_run(run, l.handle, dd[0], C.CUdeviceptr(ptr[0]), dd[1], C.CUdeviceptr(ptr[1]), ds.conv, C.int(algo),
			C.CUdeviceptr(ws), C.size_t(wsBytes), C.float(beta), dd[2], C.CUdeviceptr(ptr[2]))
		if st != 0 {
			return l.err("cudnnConvolution "+k.String(), st)
		}
		return d.afterWork(d.compute)
	})
	return nil
}

// close destroys the descriptors and the handle (on the thread); the
// library stays loaded, as cuBLAS does.
func (l *cudnn) close() error {
	for _, ds := range l.descs {
		l.destroyDescs(ds)
	}
	l.descs = nil
	if l.handle == nil {
		return nil
	}
	err := l.err("cudnnDestroy", C.vt_dnn_destroy(l.destroy, l.handle))
	l.handle = nil
	return err
}
