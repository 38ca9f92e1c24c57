//go:build cuda

package gpu

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <cuda.h>

// cuBLAS is opened with dlopen at run time, so the binary links only the
// driver (libcuda.so.1) and runs with whichever cuBLAS (13, 12, 11) the
// node has. The few entry points used are declared here rather than taken
// from cublas_v2.h, so building needs no cuBLAS headers either. Their ABI
// has been stable since CUDA 11: cublasStatus_t and the enums are ints,
// the handle is a pointer, cudaStream_t is the driver's CUstream.

typedef int (*vt_create_fn)(void **handle);
typedef int (*vt_destroy_fn)(void *handle);
typedef int (*vt_set_stream_fn)(void *handle, CUstream stream);
typedef int (*vt_set_int_fn)(void *handle, int mode);
typedef int (*vt_get_version_fn)(void *handle, int *version);
typedef int (*vt_sgemm_fn)(void *handle, int transa, int transb, int m, int n, int k,
                           const float *alpha, const float *A, int lda, const float *B, int ldb,
                           const float *beta, float *C, int ldc);
typedef int (*vt_gemmex_fn)(void *handle, int transa, int transb, int m, int n, int k,
                            const void *alpha, const void *A, int Atype, int lda, const void *B, int Btype,
                            int ldb, const void *beta, void *C, int Ctype, int ldc, int computeType, int algo);

static void *vt_dlopen(const char *path) { return dlopen(path, RTLD_NOW | RTLD_LOCAL); }

static const char *vt_dlerror(void)
{
	const char *e = dlerror();
	return e ? e : "unknown dlopen error";
}

static void *vt_dlsym(void *lib, const char *name) { return dlsym(lib, name); }

static int vt_dlclose(void *lib) { return dlclose(lib); }

// Trampolines: cgo cannot call C function pointers directly.
static int vt_create(void *fn, void **handle) { return ((vt_create_fn)fn)(handle); }
static int vt_destroy(void *fn, void *handle) { return ((vt_destroy_fn)fn)(handle); }
static int vt_set_stream(void *fn, void *handle, CUstream s) { return ((vt_set_stream_fn)fn)(handle, s); }
static int vt_set_int(void *fn, void *handle, int mode) { return ((vt_set_int_fn)fn)(handle, mode); }
static int vt_get_version(void *fn, void *handle, int *v) { return ((vt_get_version_fn)fn)(handle, v); }

// alpha and beta are passed by value and their addresses taken here: with
// CUBLAS_POINTER_MODE_HOST (the default) cuBLAS reads them before
// cublasSgemm_v2 returns.
static int vt_sgemm(void *fn, void *handle, int transa, int transb, int m, int n, int k, float alpha,
                    CUdeviceptr a, int lda, CUdeviceptr b, int ldb, float beta, CUdeviceptr c, int ldc)
{
	return ((vt_sgemm_fn)fn)(handle, transa, transb, m, n, k, &alpha, (const float *)a, lda,
	                         (const float *)b, ldb, &beta, (float *)c, ldc);
}

// vt_gemm_bf16 is cublasGemmEx with bf16 A and B (CUDA_R_16BF = 14), a
// float32 C (CUDA_R_32F = 0), float32 accumulation (CUBLAS_COMPUTE_32F =
// 68) and cuBLAS's choice of algorithm (CUBLAS_GEMM_DEFAULT = -1).
static int vt_gemm_bf16(void *fn, void *handle, int transa, int transb, int m, int n, int k, float alpha,
                        CUdeviceptr a, int lda, CUdeviceptr b, int ldb, float beta, CUdeviceptr c, int ldc)
{
	return ((vt_gemmex_fn)fn)(handle, transa, transb, m, n, k, &alpha, (const void *)a, 14, lda,
	                          (const void *)b, 14, ldb, &beta, (void *)c, 0, ldc, 68, -1);
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// cuBLAS constants (cublas_api.h; stable since CUDA 11).
const (
	cublasOpN                  = 0 // CUBLAS_OP_N
	cublasOpT                  = 1 // CUBLAS_OP_T
	cublasDefaultMath          = 0 // CUBLAS_DEFAULT_MATH: fp32 GEMMs in fp32
	cublasTF32TensorOpMath     = 3 // CUBLAS_TF32_TENSOR_OP_MATH
	cublasAtomicsNotAllowed    = 0 // CUBLAS_ATOMICS_NOT_ALLOWED
	cublasStatusNotInitialized = 1
)

// cublasSonames are the libraries tried, newest first.
var cublasSonames = []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"}

// CuBLASEnv names the environment variable with extra places to find
// cuBLAS: a colon-separated list of library files and directories, tried
// before LD_LIBRARY_PATH and the system's search.
const CuBLASEnv = "VOXTRAIN_CUBLAS"

// cublasStatusName returns the name of a cublasStatus_t.
func cublasStatusName(s C.int) string {
	switch s {
	case 0:
		return "CUBLAS_STATUS_SUCCESS"
	case 1:
		return "CUBLAS_STATUS_NOT_INITIALIZED"
	case 3:
		return "CUBLAS_STATUS_ALLOC_FAILED"
	case 7:
		return "CUBLAS_STATUS_INVALID_VALUE"
	case 8:
		return "CUBLAS_STATUS_ARCH_MISMATCH"
	case 11:
		return "CUBLAS_STATUS_MAPPING_ERROR"
	case 13:
		return "CUBLAS_STATUS_EXECUTION_FAILED"
	case 14:
		return "CUBLAS_STATUS_INTERNAL_ERROR"
	case 15:
		return "CUBLAS_STATUS_NOT_SUPPORTED"
	case 16:
		return "CUBLAS_STATUS_LICENSE_ERROR"
	}
	return fmt.Sprintf("cublasStatus %d", int(s))
}

// cublasErr turns a cublasStatus_t into an error naming the call.
func cublasErr(call string, s C.int) error {
	if s == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s", call, cublasStatusName(s))
}

// cublas is an open cuBLAS library with one handle. Its methods must run
// on the device's thread (the context must be current).
type cublas struct {
	path    string
	version int // cublasGetVersion: major·10000 + minor·100 + patch
	lib     unsafe.Pointer
	handle  unsafe.Pointer

	create, destroy, setStream, setMath, setAtomics, getVersion, sgemmFn, gemmExFn unsafe.Pointer
}

// openCuBLAS finds, opens and initialises cuBLAS, trying each candidate
// (see libpath.Candidates) until one loads, has every entry point and
// creates a handle — a library too new for the driver fails cublasCreate
// and the next, older one is tried. The error lists every attempt.
func openCuBLAS(stream cu.Stream, math Math) (*cublas, error) {
	return openFirst("cuBLAS", cublasSonames, CuBLASEnv,
		"install the CUDA runtime libraries (the nvidia/cuda *-runtime images have them) or point "+CuBLASEnv+" at libcublas.so.12 or its directory",
		func(p string) (*cublas, error) { return tryCuBLAS(p, stream, math) })
}

func tryCuBLAS(path string, stream cu.Stream, math Math) (*cublas, error) {
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	lib := C.vt_dlopen(cp)
	if lib == nil {
		return nil, fmt.Errorf("%s: %w: %s", path, errNoLib, C.GoString(C.vt_dlerror()))
	}
	b := &cublas{path: path, lib: lib}
	fail := func(err error) (*cublas, error) {
		if b.handle != nil {
			C.vt_destroy(b.destroy, b.handle)
		}
		C.vt_dlclose(lib)
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, s := range []struct {
		name string
		fn   *unsafe.Pointer
	}{
		{"cublasCreate_v2", &b.create},
		{"cublasDestroy_v2", &b.destroy},
		{"cublasSetStream_v2", &b.setStream},
		{"cublasSetMathMode", &b.setMath},
		{"cublasSetAtomicsMode", &b.setAtomics},
		{"cublasGetVersion_v2", &b.getVersion},
		{"cublasSgemm_v2", &b.sgemmFn},
		{"cublasGemmEx", &b.gemmExFn},
	} {
		cn := C.CString(s.name)
		*s.fn = C.vt_dlsym(lib, cn)
		C.free(unsafe.Pointer(cn))
		if *s.fn == nil {
			return fail(fmt.Errorf("no symbol %s", s.name))
		}
	}
	var h unsafe.Pointer
	if st := C.vt_create(b.create, &h); st != 0 {
		hint := ""
		if st == cublasStatusNotInitialized {
			hint = " (usually: this cuBLAS needs a newer driver than the node's)"
		}
		return fail(fmt.Errorf("%w%s", cublasErr("cublasCreate_v2", st), hint))
	}
	b.handle = h
	// One handle on one stream, atomics disallowed: cuBLAS then gives the
	// same bits run after run on the same GPU model and library version.
	if err := cublasErr("cublasSetStream_v2", C.vt_set_stream(b.setStream, h, C.CUstream(unsafe.Pointer(stream.C())))); err != nil {
		return fail(err)
	}
	if err := cublasErr("cublasSetAtomicsMode(NOT_ALLOWED)", C.vt_set_int(b.setAtomics, h, cublasAtomicsNotAllowed)); err != nil {
		return fail(err)
	}
	mode := C.int(cublasDefaultMath)
	if math == MathTF32 {
		mode = cublasTF32TensorOpMath
	}
	if err := cublasErr(fmt.Sprintf("cublasSetMathMode(%s)", math), C.vt_set_int(b.setMath, h, mode)); err != nil {
		return fail(err)
	}
	var v C.int
	if err := cublasErr("cublasGetVersion_v2", C.vt_get_version(b.getVersion, h, &v)); err != nil {
		return fail(err)
	}
	b.version = int(v)
	return b, nil
}

// versionString formats cublasGetVersion's number (major·10000 +
// minor·100 + patch: CUDA 11.8's cuBLAS 11.11.3 reports 111103) as
// major.minor.patch.
func (b *cublas) versionString() string {
	v := b.version
	if v >= 10000 {
		return fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100)
	}
	return fmt.Sprint(v)
}

// sgemm issues cublasSgemm_v2 (column-major) on the handle's stream.
func (b *cublas) sgemm(ta, tb bool, m, n, k int, alpha float32, a cu.DevicePtr, lda int, bp cu.DevicePtr, ldb int, beta float32, c cu.DevicePtr, ldc int) error {
	st := C.vt_sgemm(b.sgemmFn, b.handle, cublasOp(ta), cublasOp(tb), C.int(m), C.int(n), C.int(k), C.float(alpha),
		C.CUdeviceptr(a), C.int(lda), C.CUdeviceptr(bp), C.int(ldb), C.float(beta), C.CUdeviceptr(c), C.int(ldc))
	return cublasErr("cublasSgemm_v2", st)
}

// gemmBF16 issues cublasGemmEx with bf16 A and B and a float32 C
// (column-major) on the handle's stream.
func (b *cublas) gemmBF16(ta, tb bool, m, n, k int, alpha float32, a cu.DevicePtr, lda int, bp cu.DevicePtr, ldb int, beta float32, c cu.DevicePtr, ldc int) error {
	st := C.vt_gemm_bf16(b.gemmExFn, b.handle, cublasOp(ta), cublasOp(tb), C.int(m), C.int(n), C.int(k), C.float(alpha),
		C.CUdeviceptr(a), C.int(lda), C.CUdeviceptr(bp), C.int(ldb), C.float(beta), C.CUdeviceptr(c), C.int(ldc))
	return cublasErr("cublasGemmEx(bf16)", st)
}

// cublasOp returns CUBLAS_OP_T for a transposed operand, else CUBLAS_OP_N.
func cublasOp(t bool) C.int {
	if t {
		return cublasOpT
	}
	return cublasOpN
}

// close destroys the handle; the library stays loaded (unloading cuBLAS
// while its static CUDA runtime may still run callbacks is not worth the
// risk in a process that is about to exit or open it again).
func (b *cublas) close() error {
	if b.handle == nil {
		return nil
	}
	err := cublasErr("cublasDestroy_v2", C.vt_destroy(b.destroy, b.handle))
	b.handle = nil
	return err
}
