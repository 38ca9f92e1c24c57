package trainer

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/dist"
	"github.com/voxtrain/voxtrain/nn"
)

// ncclCPU is the CPU device posing as one with NCCL: its JoinNCCL wraps
// the CPU communicator in a fakeNCCL, as package gpu's wraps it in its
// NCCLComm.
type ncclCPU struct {
	*cpu.Device
	joined chan dist.Env
	// missing, when set, is why NCCL does not load on this rank.
	missing error
}

func (d ncclCPU) NCCLAvailable() error { return d.missing }

func (d ncclCPU) JoinNCCL(_ context.Context, scalars dist.Comm, env dist.Env, _ dist.Options) (dist.Comm, error) {
	d.joined <- env
	return &fakeNCCL{Comm: scalars}, nil
}

// fakeNCCL averages the gradient tensors it is handed (the CPU's, host
// memory) over its scalars' communicator, counting the calls.
type fakeNCCL struct {
	dist.Comm
	calls int
}

func (f *fakeNCCL) ReduceMean(grads []nn.Tensor) error {
	f.calls++
	for _, g := range grads {
		d := g.(hostData).Data()
		if err := f.AllReduceSum(context.Background(), d); err != nil {
			return err
		}
		for i := range d {
			d[i] /= float32(f.Size())
		}
	}
	return nil
}

// TestNCCLDeviceGetsItsCommunicator: on a device with NCCL, newComm
// returns the device's communicator and reduceGrads hands it the gradient
// tensors (no host staging); VOXTRAIN_DIST_BACKEND=tcp keeps the TCP ring.
func TestNCCLDeviceGetsItsCommunicator(t *testing.T) {
	port := freePort(t)
	const n = 2
	devs := make([]ncclCPU, n)
	comms := make([]dist.Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		devs[r] = ncclCPU{Device: cpu.New(cpu.Options{Threads: 1}), joined: make(chan dist.Env, 1)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			env := dist.Env{Rank: r, WorldSize: n, LocalRank: r, LocalWorldSize: n, MasterAddr: "127.0.0.1", MasterPort: port}
			comms[r], errs[r] = newComm(context.Background(), env, devs[r], func(string, ...any) { t.Error("a warning with NCCL on every rank") })
		}()
	}
	wg.Wait()
	for r := range n {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		defer comms[r].Close()
		if env := <-devs[r].joined; env.Rank != r || env.WorldSize != n {
			t.Errorf("rank %d: JoinNCCL got %+v", r, env)
		}
	}
	jobs := make([]*job, n)
	params := make([][]*nn.Param, n)
	for r := range n {
		jobs[r] = &job{comm: comms[r], ctx: context.Background()}
		for k, l := range []int{3, 5} {
			g := devs[r].Alloc(nn.Shape{l})
			d := g.(hostData).Data()
			for i := range d {
				d[i] = float32(r*10 + k + i)
			}
			params[r] = append(params[r], &nn.Param{G: g})
		}
	}
	for r, err := range onRanksErr(n, func(r int) error { return jobs[r].reduceGrads(devs[r], params[r]) }) {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for r := range n {
		if f := comms[r].(*fakeNCCL); f.calls != 1 || jobs[r].staging != nil {
			t.Errorf("rank %d: %d ReduceMean calls, staging %v", r, f.calls, jobs[r].staging != nil)
		}
		for k, p := range params[r] {
			for i, v := range p.G.(hostData).Data() {
				if want := float32(5 + k + i); v != want {
					t.Fatalf("rank %d grad %d[%d] = %v, want the mean %v", r, k, i, v, want)
				}
			}
		}
	}
}

func onRanksErr(n int, f func(r int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() { defer wg.Done(); errs[r] = f(r) }()
	}
	wg.Wait()
	return errs
}

func TestDistBackend(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == backendEnv {
				return v
			}
			return ""
		}
	}
	for _, v := range []string{"", "tcp", "nccl"} {
		if got, err := distBackend(env(v)); got != v || err != nil {
			t.Errorf("%q: %q %v", v, got, err)
		}
	}
	if _, err := distBackend(env("gloo")); err == nil || !strings.Contains(err.Error(), `VOXTRAIN_DIST_BACKEND="gloo": want tcp or nccl`) {
		t.Errorf("gloo: %v", err)
	}
	dev := ncclCPU{Device: cpu.New(cpu.Options{Threads: 1})}
	if !forcedNCCL(env("nccl"), dev) || forcedNCCL(env(""), dev) || forcedNCCL(env("nccl"), dev.Device) {
		t.Error("forcedNCCL: want it for nccl on a device with NCCL only")
	}
}

// TestNCCLMissingOnARank: when NCCL loads on some ranks only, every rank
// stays on the TCP ring (a warning on each) — never a job whose ranks
// reduce in different ways — and VOXTRAIN_DIST_BACKEND=nccl is an error
// on every rank naming how many lack it.
func TestNCCLMissingOnARank(t *testing.T) {
	for _, backend := range []string{"", "nccl"} {
		t.Run("backend="+backend, func(t *testing.T) {
			t.Setenv(backendEnv, backend)
			port := freePort(t)
			const n = 2
			comms := make([]dist.Comm, n)
			warns := make([]string, n)
			errs := onRanksErr(n, func(r int) error {
				d := ncclCPU{Device: cpu.New(cpu.Options{Threads: 1}), joined: make(chan dist.Env, 1)}
				if r == 1 {
					d.missing = errors.New("cannot load NCCL (libnccl.so.2): no file found")
				}
				env := dist.Env{Rank: r, WorldSize: n, LocalRank: r, LocalWorldSize: n, MasterAddr: "127.0.0.1", MasterPort: port}
				var err error
				comms[r], err = newComm(context.Background(), env, d, func(msg string, _ ...any) { warns[r] = msg })
				if err == nil && len(d.joined) > 0 {
					return errors.New("joined NCCL")
				}
				return err
			})
			for r := range n {
				if backend == "nccl" {
					if errs[r] == nil || !strings.Contains(errs[r].Error(), "VOXTRAIN_DIST_BACKEND=nccl: NCCL cannot be loaded on 1 of the 2 ranks") {
						t.Errorf("rank %d: %v, want the forced backend refused", r, errs[r])
					}
					continue
				}
				if errs[r] != nil {
					t.Fatalf("rank %d: %v", r, errs[r])
				}
				defer comms[r].Close()
				if _, isNCCL := comms[r].(*fakeNCCL); isNCCL || !strings.Contains(warns[r], "NCCL cannot be loaded on 1 of the 2 ranks") {
					t.Errorf("rank %d: communicator %T, warning %q: want the TCP ring and a warning", r, comms[r], warns[r])
				}
			}
		})
	}
}

// freePort returns a TCP port of the loopback that was free a moment ago,
// for a job's store.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
