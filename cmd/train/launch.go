package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// LaunchOptions are `train launch`'s.
type LaunchOptions struct {
	IO *IOStreams
	// NProcPerNode processes start on this node; NNodes nodes take part;
	// this is node NodeRank.
	NProcPerNode, NNodes, NodeRank int
	// MasterAddr and MasterPort are where rank 0 serves the store (port
	// 0: a free one, on one node only).
	MasterAddr string
	MasterPort int
	// Grace is how long a child has after SIGTERM before SIGKILL, once
	// another child failed.
	Grace time.Duration
	// Args are each child's arguments (what follows --).
	Args []string
	// Executable is the program the children run ("": this one).
	Executable string
}

// NewCmdLaunch builds `train launch`; runF (nil: launchRun) receives the
// options.
func NewCmdLaunch(f *Factory, runF func(context.Context, *LaunchOptions) error) *cobra.Command {
	opts := &LaunchOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "launch --nproc-per-node N [flags] -- [TRAIN ARGS...]",
		Short: "Start a training's processes on this node, as torchrun does",
		Long: `launch starts N processes of this program on this node, each running
train with the arguments after --, and with torchrun's variables set:
RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT.
The processes meet through the store rank 0 serves at MASTER_ADDR:MASTER_PORT.

Each line a process writes is prefixed with [rank K]. SIGINT and SIGTERM
are passed on to every process. When one process fails, the others get
SIGTERM, then SIGKILL after --grace; launch exits with the first failure's
status (0 once every process finished, 128+signal when interrupted).

On several nodes run launch on each with the same --nnodes, --master-addr
(node 0's address) and --master-port, and each node's --node-rank.

Unless GOMAXPROCS is set, each process gets GOMAXPROCS = cores / N, so N
CPU trainings share the node's cores instead of each taking all of them
(give --threads after -- to choose otherwise).`,
		Example: `  train launch --nproc-per-node 4 -- --config configs/nnunet_3d_fullres.yaml
  train launch --nnodes 2 --node-rank 1 --nproc-per-node 8 --master-addr 10.0.0.1 --master-port 29500 -- --config configs/nnunet_3d_fullres.yaml`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && cmd.ArgsLenAtDash() != 0 {
				return fmt.Errorf("the training's arguments go after --, as in: train launch --nproc-per-node 2 -- --config run.yaml (got %q before it)", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Args = args
			if err := opts.check(); err != nil {
				return usageErr(cmd, err)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return launchRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&opts.NProcPerNode, "nproc-per-node", 0, "processes to start on this node (one per GPU)")
	fl.IntVar(&opts.NNodes, "nnodes", 1, "nodes taking part")
	fl.IntVar(&opts.NodeRank, "node-rank", 0, "this node's index, 0 to --nnodes−1")
	fl.StringVar(&opts.MasterAddr, "master-addr", "127.0.0.1", "node 0's address, where rank 0 serves the store")
	fl.IntVar(&opts.MasterPort, "master-port", 0, "the store's port (0: a free one; needed on several nodes)")
	fl.DurationVar(&opts.Grace, "grace", 30*time.Second, "how long a process has after SIGTERM before SIGKILL once another failed")
	cmd.MarkFlagRequired("nproc-per-node")
	return cmd
}

// check holds the flags to what a job can be.
func (o *LaunchOptions) check() error {
	switch {
	case o.NProcPerNode < 1:
		return fmt.Errorf("--nproc-per-node %d: at least 1", o.NProcPerNode)
	case o.NNodes < 1:
		return fmt.Errorf("--nnodes %d: at least 1", o.NNodes)
	case o.NodeRank < 0 || o.NodeRank >= o.NNodes:
		return fmt.Errorf("--node-rank %d: 0 to %d with --nnodes %d", o.NodeRank, o.NNodes-1, o.NNodes)
	case o.MasterPort < 0 || o.MasterPort > 65535:
		return fmt.Errorf("--master-port %d is not a TCP port", o.MasterPort)
	case o.MasterAddr == "":
		return errors.New("--master-addr is empty")
	case o.Grace < 0:
		return fmt.Errorf("--grace %v is negative", o.Grace)
	}
	if o.NNodes > 1 {
		if o.MasterPort == 0 {
			return fmt.Errorf("--master-port is needed with --nnodes %d: every node must name the same port", o.NNodes)
		}
		if ip := net.ParseIP(o.MasterAddr); o.MasterAddr == "localhost" || (ip != nil && ip.IsLoopback()) {
			return fmt.Errorf("--master-addr %s: with --nnodes %d it must be node 0's address, reachable from every node", o.MasterAddr, o.NNodes)
		}
	}
	return nil
}

// childFailed is launch's error when a process failed: main exits with
// its status.
type childFailed struct {
	rank, status int
}

func (e *childFailed) Error() string {
	return fmt.Sprintf("rank %d exited with status %d; the other ranks were stopped", e.rank, e.status)
}

// ExitStatus is the status launch exits with (see exitCode).
func (e *childFailed) ExitStatus() int { return e.status }

// childGOMAXPROCS is the GOMAXPROCS each of n processes on a node of
// cpus cores gets when the user has not set it (set: "", keep theirs):
// an equal share, at least 1, so n CPU trainings (whose "--threads 0"
// means GOMAXPROCS) do not each take every core — torchrun sets
// OMP_NUM_THREADS for the same reason.
func childGOMAXPROCS(set string, cpus, n int) string {
	if set != "" || n <= 1 {
		return ""
	}
	return strconv.Itoa(max(1, cpus/n))
}

// launchEnv is the names launch sets in each child's environment.
var launchEnv = []string{"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}

// launchRun starts the processes and waits for them (see NewCmdLaunch).
func launchRun(ctx context.Context, opts *LaunchOptions) error {
	exe := opts.Executable
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return fmt.Errorf("launch: finding this program: %w", err)
		}
	}
	port := opts.MasterPort
	if port == 0 {
		ln, err := net.Listen("tcp", net.JoinHostPort(opts.MasterAddr, "0"))
		if err != nil {
			return fmt.Errorf("launch: finding a free port on %s: %w", opts.MasterAddr, err)
		}
		port = ln.Addr().(*net.TCPAddr).Port
		ln.Close() // rank 0 listens on it next; the window is torchrun's too
	}
	n, world := opts.NProcPerNode, opts.NNodes*opts.NProcPerNode
	base := opts.NodeRank * n
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !contains(launchEnv, name) {
			env = append(env, kv)
		}
	}
	if gm := childGOMAXPROCS(os.Getenv("GOMAXPROCS"), runtime.NumCPU(), n); gm != "" {
		env = append(env, "GOMAXPROCS="+gm)
	}
	// launch's own lines share the children's lock on ErrOut: a child's
	// line may be written while launch reports another's exit.
	var outMu, errMu sync.Mutex
	logf := func(format string, args ...any) {
		errMu.Lock()
		defer errMu.Unlock()
		fprintf(opts.IO.ErrOut, format, args...)
	}
	logf("launch: ranks %d to %d of %d on this node, the store at %s\n", base, base+n-1, world,
		net.JoinHostPort(opts.MasterAddr, strconv.Itoa(port)))

	type exit struct{ rank, status int }
	cmds := make([]*exec.Cmd, n)
	flushes := make([]func(), n)
	exits := make(chan exit, n)
	started := make(chan error, 1)
	allDone := make(chan struct{})
	go func() {
		// The children get SIGTERM should launch die (Pdeathsig), which
		// Linux ties to the thread that started them: that thread stays
		// this goroutine's until every child has exited.
		runtime.LockOSThread()
		for i := range n {
			rank := base + i
			c := exec.Command(exe, opts.Args...)
			c.Env = append(append([]string(nil), env...),
				"RANK="+strconv.Itoa(rank), "LOCAL_RANK="+strconv.Itoa(i), "WORLD_SIZE="+strconv.Itoa(world),
				"LOCAL_WORLD_SIZE="+strconv.Itoa(n), "MASTER_ADDR="+opts.MasterAddr, "MASTER_PORT="+strconv.Itoa(port))
			prefix := fmt.Sprintf("[rank %d] ", rank)
			out, errw := &prefixWriter{mu: &outMu, w: opts.IO.Out, prefix: prefix}, &prefixWriter{mu: &errMu, w: opts.IO.ErrOut, prefix: prefix}
			c.Stdin, c.Stdout, c.Stderr = nil, out, errw
			c.SysProcAttr = childSysProcAttr()
			c.WaitDelay = opts.Grace + time.Second // a grandchild holding the output open
			if err := c.Start(); err != nil {
				started <- fmt.Errorf("launch: starting rank %d (%s): %w", rank, exe, err)
				for _, s := range cmds[:i] {
					s.Process.Kill()
				}
				for _, s := range cmds[:i] {
					s.Wait()
				}
				return
			}
			cmds[i], flushes[i] = c, func() { out.flush(); errw.flush() }
		}
		started <- nil
		for i, c := range cmds {
			go func() {
				c.Wait()
				flushes[i]()
				exits <- exit{base + i, exitStatus(c.ProcessState)}
			}()
		}
		<-allDone
	}()
	defer close(allDone)
	if err := <-started; err != nil {
		return err
	}

	running := make([]bool, n)
	for i := range running {
		running[i] = true
	}
	signalAll := func(sig os.Signal) {
		for i, c := range cmds {
			if running[i] {
				c.Process.Signal(sig)
			}
		}
	}
	var failed *childFailed
	var interrupted error
	var kill <-chan time.Time
	done := ctx.Done()
	for left := n; left > 0; {
		select {
		case e := <-exits:
			left--
			running[e.rank-base] = false
			if e.status != 0 && failed == nil && interrupted == nil {
				failed = &childFailed{rank: e.rank, status: e.status}
				logf("launch: rank %d exited with status %d; stopping the others (SIGTERM, SIGKILL after %v)\n", e.rank, e.status, opts.Grace)
				signalAll(syscall.SIGTERM)
				kill = time.After(opts.Grace)
			}
		case <-done:
			done = nil
			sig, cause := syscall.SIGTERM, context.Cause(ctx)
			var is interruptSignal
			if errors.As(cause, &is) {
				sig = is.sig
			} else {
				kill = time.After(opts.Grace) // no signal: nobody is there to abandon the children
			}
			if failed == nil {
				interrupted = fmt.Errorf("launch: %v: %w", cause, context.Canceled)
			}
			signalAll(sig)
		case <-kill:
			kill = nil
			signalAll(syscall.SIGKILL)
		}
	}
	if failed != nil {
		return failed
	}
	return interrupted
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// prefixWriter writes whole lines to w, each after prefix; the lines of
// the processes sharing w (and mu) never mix.
type prefixWriter struct {
	mu     *sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
}

// maxLine is how much of an unfinished line is held before it is written
// as a line of its own.
const maxLine = 64 << 10

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			if len(p.buf) < maxLine {
				return len(b), nil
			}
			i = len(p.buf) - 1
		}
		p.emit(p.buf[:i+1])
		p.buf = p.buf[i+1:]
	}
}

func (p *prefixWriter) emit(line []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := append([]byte(p.prefix), line...)
	if out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	p.w.Write(out)
}

// flush writes an unfinished last line.
func (p *prefixWriter) flush() {
	if len(p.buf) > 0 {
		p.emit(p.buf)
		p.buf = nil
	}
}
