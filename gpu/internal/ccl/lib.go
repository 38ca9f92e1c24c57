// Package ccl is the device-independent half of voxtrain's NCCL
// communicator: the rendezvous through dist's store, the gradient buckets,
// the mean over the ranks and the watchdog that aborts a communicator
// whose all-reduce stops making progress, over a small Lib interface.
//
// Package gpu implements Lib with NCCL itself (opened with dlopen, behind
// the cuda build tag); the tests of this package implement it with an
// in-process fake whose ranks are goroutines and whose device memory is
// host memory, checking every call's arguments as NCCL does. So all of the
// communicator's logic runs in CI on machines without a GPU, as
// gpu/internal/dnn's does for cuDNN.
package ccl

import "fmt"

// Result is ncclResult_t (nccl.h).
type Result int

// NCCL's results (nccl.h; stable since NCCL 2.0, InProgress since 2.14,
// Timeout since 2.24).
const (
	Success            Result = 0
	UnhandledCudaError Result = 1
	SystemError        Result = 2
	InternalError      Result = 3
	InvalidArgument    Result = 4
	InvalidUsage       Result = 5
	RemoteError        Result = 6
	InProgress         Result = 7
	Timeout            Result = 8
)

// String is the result's name in nccl.h.
func (r Result) String() string {
	switch r {
	case Success:
		return "ncclSuccess"
	case UnhandledCudaError:
		return "ncclUnhandledCudaError"
	case SystemError:
		return "ncclSystemError"
	case InternalError:
		return "ncclInternalError"
	case InvalidArgument:
		return "ncclInvalidArgument"
	case InvalidUsage:
		return "ncclInvalidUsage"
	case RemoteError:
		return "ncclRemoteError"
	case InProgress:
		return "ncclInProgress"
	case Timeout:
		return "ncclTimeout"
	}
	return fmt.Sprintf("ncclResult %d", int(r))
}

// hint says what a result usually means for a user, where NCCL's own
// string does not.
func (r Result) hint() string {
	switch r {
	case UnhandledCudaError:
		return "a CUDA call inside NCCL failed (see NCCL_DEBUG=WARN)"
	case SystemError:
		return "a system call or the network failed (see NCCL_DEBUG=WARN; NCCL_SOCKET_IFNAME picks the interface)"
	case RemoteError:
		return "a peer failed or went away"
	case InvalidUsage:
		return "the ranks' calls differ, or a call came after the communicator was aborted"
	}
	return ""
}

// DataType is ncclDataType_t.
type DataType int

// The element types the trainer reduces (nccl.h: ncclFloat32 = 7,
// ncclBfloat16 = 9, since NCCL 2.10).
const (
	Float32  DataType = 7
	BFloat16 DataType = 9
)

// Size is the bytes of one element.
func (d DataType) Size() int {
	switch d {
	case Float32:
		return 4
	case BFloat16:
		return 2
	}
	return 0
}

func (d DataType) String() string {
	switch d {
	case Float32:
		return "ncclFloat32"
	case BFloat16:
		return "ncclBfloat16"
	}
	return fmt.Sprintf("ncclDataType %d", int(d))
}

// RedOp is ncclRedOp_t; the trainer sums (ncclSum = 0) and scales after.
type RedOp int

// Sum is ncclSum.
const Sum RedOp = 0

// UniqueID is ncclUniqueId: rank 0 makes it, every rank passes it to
// CommInitRank (NCCL_UNIQUE_ID_BYTES = 128).
type UniqueID [128]byte

// Handle is an ncclComm_t, Stream a cudaStream_t (the driver's CUstream),
// both opaque here.
type (
	Handle uintptr
	Stream uintptr
)

// Lib is the part of NCCL (and of CUDA's stream API) the communicator
// uses. B is the device pointer type. Every method but ErrorString
// returns NCCL's result as it is; the communicator turns them into errors.
// The implementation runs the calls where the device's context is current.
type Lib[B any] interface {
	// Version is ncclGetVersion: major·10000 + minor·100 + patch.
	Version() (int, Result)
	// UniqueID is ncclGetUniqueId.
	UniqueID() (UniqueID, Result)
	// CommInitRank is ncclCommInitRank; it returns when every rank of the
	// id has called it.
	CommInitRank(nranks int, id UniqueID, rank int) (Handle, Result)
	// AllReduce is ncclAllReduce: enqueued on s, it returns at once.
	AllReduce(send, recv B, count int, dt DataType, op RedOp, comm Handle, s Stream) Result
	// GroupStart and GroupEnd are ncclGroupStart and ncclGroupEnd: the
	// all-reduces between them are launched together at GroupEnd.
	GroupStart() Result
	GroupEnd() Result
	// CommGetAsyncError is ncclCommGetAsyncError: the communicator's state
	// (Success, InProgress, or the error a peer or the network caused),
	// and the call's own result.
	CommGetAsyncError(comm Handle) (state, r Result)
	// CommAbort is ncclCommAbort: it stops the communicator's kernels and
	// frees it. CommDestroy is ncclCommDestroy, after the work is done.
	CommAbort(comm Handle) Result
	CommDestroy(comm Handle) Result
	// ErrorString is ncclGetErrorString.
	ErrorString(r Result) string
	// StreamDone reports whether the work enqueued on s so far has
	// completed (cuStreamQuery), or the error of a failed kernel.
	StreamDone(s Stream) (bool, error)
}

// Error is a failed NCCL call.
type Error struct {
	Call   string // "ncclAllReduce"
	Result Result
	Text   string // ncclGetErrorString's
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%s: %v", e.Call, e.Result)
	if e.Text != "" {
		msg += " (" + e.Text + ")"
	}
	if h := e.Result.hint(); h != "" {
		msg += ": " + h
	}
	return msg
}

// check turns a call's result into an *Error (nil for Success).
func check[B any](lib Lib[B], call string, r Result) error {
	if r == Success {
		return nil
	}
	return &Error{Call: call, Result: r, Text: lib.ErrorString(r)}
}

// VersionString writes ncclGetVersion's code as "2.21.5" (codes below
// 2900 are major·1000 + minor·100 + patch, NCCL_VERSION's old form).
func VersionString(code int) string {
	if code < 2900 {
		return fmt.Sprintf("%d.%d.%d", code/1000, code%1000/100, code%100)
	}
	return fmt.Sprintf("%d.%d.%d", code/10000, code%10000/100, code%100)
}
