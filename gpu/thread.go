//go:build cuda

package gpu

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"gorgonia.org/cu"
)

// thread is the goroutine, locked to its OS thread, on which the CUDA
// context is current and every driver and cuBLAS call runs. Calls arrive
// as closures on a queue and run in arrival order, which is also the order
// their work reaches the GPU's streams.
//
// Why one thread: a CUDA context is current per OS thread, and goroutines
// move between OS threads at any call; funnelling every call to one locked
// thread makes "the context is current" true by construction, and makes
// the issue order of all work a single, observable sequence.
type thread struct {
	work chan func()
	done chan struct{} // closed when the loop has exited

	mu     sync.Mutex
	closed bool
	onErr  func(error) // receives failures of queued (asynchronous) calls
}

// queueDepth bounds the calls queued ahead of the driver: enough for a
// whole U-Net step's launches, so the host runs ahead of the GPU; a full
// queue makes the issuing goroutine wait (back-pressure).
const queueDepth = 8192

// startThread starts the loop, runs init on it (to make the context
// current) and returns once init has run; init's error stops the loop.
func startThread(init func() error, fini func(), onErr func(error)) (*thread, error) {
	t := &thread{work: make(chan func(), queueDepth), done: make(chan struct{}), onErr: onErr}
	ready := make(chan error, 1)
	go func() {
		defer close(t.done)
		// Never unlocked: if the loop exits, the goroutine's OS thread
		// exits with it, taking its current-context binding along.
		runtime.LockOSThread()
		if err := init(); err != nil {
			ready <- err
			return
		}
		ready <- nil
		for f := range t.work {
			f()
		}
		if fini != nil {
			fini()
		}
	}()
	if err := <-ready; err != nil {
		<-t.done
		return nil, err
	}
	return t, nil
}

// errClosed is returned by calls on a closed device.
var errClosed = errors.New("gpu: device is closed")

// post queues f without waiting. A failure of f is reported to onErr
// (the device's sticky error), described by what.
func (t *thread) post(what func() string, f func() error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		t.onErr(fmt.Errorf("%s: %w", what(), errClosed))
		return
	}
	t.work <- func() {
		if err := f(); err != nil {
			t.onErr(fmt.Errorf("%s: %w", what(), err))
		}
	}
}

// tryPost queues f unless the device is closed, ignoring its failure: for
// releasing driver objects from cleanups, which may run after Close (the
// objects then died with the context).
func (t *thread) tryPost(f func() error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed {
		t.work <- func() { _ = f() }
	}
}

// do runs f on the thread and returns its error. f must not call do or
// post (it would wait for itself).
func (t *thread) do(f func() error) error {
	res := make(chan error, 1)
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return errClosed
	}
	t.work <- func() { res <- f() }
	t.mu.Unlock()
	return <-res
}

// stop runs last on the thread after everything queued, then ends the
// loop and waits for it.
func (t *thread) stop(last func()) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.work <- last
	t.closed = true
	close(t.work)
	t.mu.Unlock()
	<-t.done
}

// cuErr names a failed driver call: "cuMemAlloc(1048576 bytes): OutOfMemory".
func cuErr(call string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", call, err)
}

// isNotReady reports whether a driver result is CUDA_ERROR_NOT_READY
// (cuEventQuery's "still pending", not a failure).
func isNotReady(err error) bool { return err == cu.NotReady }
