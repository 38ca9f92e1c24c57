package trainer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/gob"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/voxtrain/voxtrain/dist"
	"github.com/voxtrain/voxtrain/evaluation"
	"github.com/voxtrain/voxtrain/nn"
)

// job is the run's place in a data-parallel job: its communicator and
// the context its collective calls use. A nil *job is a run of one
// process; every method is then a no-op, so the loop reads the same for
// both.
//
// Every rank makes the same collective calls in the same order: one
// gradient reduction and one stop/loss reduction per step, the
// validation's sums, a barrier either side of each checkpoint. A rank
// that dies or stalls makes the next call on every other rank fail with
// dist's *PeerError naming it, after the communicator's timeout at most.
type job struct {
	comm dist.Comm
	// ctx is the run's context without its cancellation: a signal stops
	// the loop at a step every rank agrees on (agreeStop), so the calls
	// up to that step must not fail because one rank was signalled
	// first. Hangs are the communicator's timeout's business.
	ctx context.Context
	// own is set when the trainer joined the job itself (and leaves it).
	own bool
	// staging holds gradients downloaded from a device whose tensors are
	// not host memory, one buffer per parameter.
	staging [][]float32
	// bucketBytes is the gradients' bucket size (0: dist.DefaultBucketBytes;
	// tests make it small to have many buckets).
	bucketBytes int
}

// newComm joins the job env describes on device dev: the CPU
// communicator (dist.Init: a ring over TCP), and on a device with NCCL
// (package gpu's CUDA device) an NCCL communicator made through the same
// store, to which reduceGrads hands the gradient tensors themselves
// (device memory, no host staging). The scalar collectives — the step's
// stop flag and loss, validation sums, barriers, broadcasts — stay on the
// TCP ring: they are a few host values, which NCCL would have to copy to
// the device and back, and the ring names a rank that dies, which the
// NCCL watchdog then reports too. VOXTRAIN_DIST_BACKEND=tcp keeps a CUDA
// device on the TCP ring (gradients staged through host memory).
//
// Every rank must reduce the same way, so before any joins NCCL the ranks
// agree (one all-reduce on the ring) whether it loads on every one of
// them; where it does not, VOXTRAIN_DIST_BACKEND=nccl is an error and the
// default says so through warn and stays on the TCP ring.
var newComm = func(ctx context.Context, env dist.Env, dev nn.Device, warn func(msg string, args ...any)) (dist.Comm, error) {
	opts, err := commOptions(os.Getenv)
	if err != nil {
		return nil, err
	}
	backend, err := distBackend(os.Getenv)
	if err != nil {
		return nil, err
	}
	c, err := dist.Init(ctx, env, opts)
	if err != nil {
		return nil, err
	}
	nd, ok := dev.(ncclDevice)
	if !ok || backend == "tcp" {
		return c, nil
	}
	avail := nd.NCCLAvailable()
	missing := []float32{0}
	if avail != nil {
		missing[0] = 1
	}
	if err := c.AllReduceSum(ctx, missing); err != nil {
		c.Close()
		return nil, fmt.Errorf("agreeing on NCCL: %w", err)
	}
	if n := int(missing[0]); n > 0 {
		why := fmt.Sprintf("NCCL cannot be loaded on %d of the %d ranks", n, max(1, env.WorldSize))
		if avail != nil {
			why += fmt.Sprintf(" (this one: %v)", avail)
		}
		if backend == "nccl" {
			c.Close()
			return nil, fmt.Errorf("%s=nccl: %s", backendEnv, why)
		}
		warn(why+"; the gradients go through host memory over the TCP ring instead (slower): point "+ncclEnvHint+" at libnccl.so.2 or its folder", "rank", env.Rank)
		return c, nil
	}
	nc, err := nd.JoinNCCL(ctx, c, env, opts)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("%w (%s=tcp stages the gradients through host memory over TCP instead)", err, backendEnv)
	}
	return nc, nil
}

// ncclDevice is a device whose gradients a job can all-reduce in device
// memory: package gpu's CUDA device (JoinNCCL returns a communicator
// that is also a deviceReducer).
type ncclDevice interface {
	// NCCLAvailable is nil when NCCL loads on this node, else why not.
	NCCLAvailable() error
	JoinNCCL(ctx context.Context, scalars dist.Comm, env dist.Env, opts dist.Options) (dist.Comm, error)
}

// ncclEnvHint names package gpu's NCCLEnv (which the trainer, built
// without the cuda tag too, cannot import).
const ncclEnvHint = "VOXTRAIN_NCCL"

// deviceReducer is a communicator that averages gradients over the ranks
// where they are, on the device.
type deviceReducer interface {
	ReduceMean(grads []nn.Tensor) error
}

// backendEnv picks the gradients' communicator: "" (NCCL where the device
// has it, else TCP), "tcp", or "nccl", which also makes a job of one
// process use NCCL (to measure its cost).
const backendEnv = "VOXTRAIN_DIST_BACKEND"

func distBackend(getenv func(string) string) (string, error) {
	switch v := getenv(backendEnv); v {
	case "", "tcp", "nccl":
		return v, nil
	default:
		return "", fmt.Errorf("%s=%q: want tcp or nccl", backendEnv, v)
	}
}

// forcedNCCL reports whether a process alone joins a job of one anyway,
// for NCCL (VOXTRAIN_DIST_BACKEND=nccl on a device that has it).
func forcedNCCL(getenv func(string) string, dev nn.Device) bool {
	_, ok := dev.(ncclDevice)
	return ok && getenv(backendEnv) == "nccl"
}

// commOptions reads the communicator's timeouts from VOXTRAIN_DIST_TIMEOUT
// (how long a collective call waits for a silent rank before failing
// naming it; dist.DefaultTimeout) and VOXTRAIN_DIST_JOIN_TIMEOUT (how long
// the ranks wait for each other at the start, rank 0's dataset setup
// included; dist.DefaultJoinTimeout), Go durations ("90s", "20m").
func commOptions(getenv func(string) string) (dist.Options, error) {
	var o dist.Options
	for _, v := range []struct {
		name string
		dst  *time.Duration
	}{{"VOXTRAIN_DIST_TIMEOUT", &o.Timeout}, {"VOXTRAIN_DIST_JOIN_TIMEOUT", &o.JoinTimeout}} {
		s := getenv(v.name)
		if s == "" {
			continue
		}
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return o, fmt.Errorf("%s=%q: want a positive duration such as 90s or 20m", v.name, s)
		}
		*v.dst = d
	}
	return o, nil
}

func (j *job) rank() int {
	if j == nil {
		return 0
	}
	return j.comm.Rank()
}

func (j *job) size() int {
	if j == nil {
		return 1
	}
	return j.comm.Size()
}

// writer reports whether this process writes the run's files (rank 0).
func (j *job) writer() bool { return j.rank() == 0 }

// callCtx is the context for work every rank must do in step: the
// uncancellable one in a job, ctx itself alone.
func (j *job) callCtx(ctx context.Context) context.Context {
	if j == nil {
		return ctx
	}
	return j.ctx
}

// barrier waits for every rank.
func (j *job) barrier(what string) error {
	if j == nil {
		return nil
	}
	if err := j.comm.Barrier(j.ctx); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// hostData is a tensor that lives in host memory (the CPU device's).
type hostData interface{ Data() []float32 }

// reduceGrads replaces every parameter's gradient by its mean over the
// ranks: summed by dist.AllReduceBuckets (DDP's 25 MiB buckets, last
// layers first), then multiplied by 1/N. Each rank's loss is the mean
// over its own samples, and the shares are equal, so the mean of the
// ranks' gradients is the gradient of the global batch's mean loss, up
// to float summation order. A batch Dice is not such a mean: each rank
// computes the global batch's (sumDiceSums) and writes N times its
// gradient with respect to its own outputs (nn.Criterion.SetBatchReducer),
// so that this mean is again the global loss's gradient.
//
// A communicator that reduces on the device (NCCL) gets the gradient
// tensors themselves.
func (j *job) reduceGrads(dev nn.Device, params []*nn.Param) error {
	if r, ok := j.comm.(deviceReducer); ok {
		gs := make([]nn.Tensor, len(params))
		for i, p := range params {
			gs[i] = p.G
		}
		return r.ReduceMean(gs)
	}
	n := j.comm.Size()
	bufs := make([][]float32, len(params))
	host := true
	for i, p := range params {
		h, ok := p.G.(hostData)
		if !ok {
			host = false
			break
		}
		bufs[i] = h.Data()
	}
	if !host {
		if j.staging == nil {
			j.staging = make([][]float32, len(params))
			for i, p := range params {
				j.staging[i] = make([]float32, p.G.Shape().Len())
			}
		}
		s := dev.ComputeStream()
		for i, p := range params {
			if err := dev.Download(s, j.staging[i], p.G); err != nil {
				return err
			}
			bufs[i] = j.staging[i]
		}
		s.Synchronize()
	}
	if err := dist.AllReduceBuckets(j.ctx, j.comm, bufs, j.bucketBytes); err != nil {
		return err
	}
	inv := float32(1 / float64(n))
	for _, b := range bufs {
		for k := range b {
			b[k] *= inv
		}
	}
	if !host {
		s := dev.ComputeStream()
		for i, p := range params {
			if err := dev.Upload(s, p.G, bufs[i]); err != nil {
				return err
			}
		}
		s.Synchronize()
	}
	return nil
}

// split64 writes x as two float32s whose sum is x to about 48 bits, so
// that an all-reduce in float32 sums float64 values nearly exactly.
func split64(x float64) (hi, lo float32) {
	hi = float32(x)
	return hi, float32(x - float64(hi))
}

// agreeStep sums, over the ranks, whether each wants to stop after this
// step (a signal, the step limit) and its loss: every rank stops at the
// same step, and logs the same loss (the mean of the ranks' losses, the
// global batch's loss).
func (j *job) agreeStep(stop bool, loss float64) (anyStop bool, meanLoss float64, err error) {
	if j == nil {
		return stop, loss, nil
	}
	buf := make([]float32, 3)
	if stop {
		buf[0] = 1
	}
	buf[1], buf[2] = split64(loss)
	if err := j.comm.AllReduceSum(j.ctx, buf); err != nil {
		return false, 0, fmt.Errorf("agree on the step's end: %w", err)
	}
	return buf[0] > 0, (float64(buf[1]) + float64(buf[2])) / float64(j.comm.Size()), nil
}

// sumInt64 sums non-negative counts over the ranks exactly: each is cut
// into four 16-bit limbs, whose float32 sums stay exact for up to 256
// ranks, and put together again.
func (j *job) sumInt64(xs []int64) error {
	if j == nil || len(xs) == 0 {
		return nil
	}
	bits, err := limbBits(j.comm.Size())
	if err != nil {
		return err
	}
	limbs, mask := int(64/bits), int64(1)<<bits-1
	buf := make([]float32, limbs*len(xs))
	for i, x := range xs {
		if x < 0 {
			return fmt.Errorf("sum of counts: %d is negative", x)
		}
		for l := range limbs {
			buf[limbs*i+l] = float32((x >> (bits * uint(l))) & mask)
		}
	}
	if err := j.comm.AllReduceSum(j.ctx, buf); err != nil {
		return err
	}
	for i := range xs {
		var v int64
		for l := range limbs {
			v += int64(buf[limbs*i+l]) << (bits * uint(l))
		}
		xs[i] = v
	}
	return nil
}

// limbBits returns the width of the limbs sumInt64 cuts its values into
// for a job of ranks processes: a limb's sum over the ranks,
// ranks·(2^bits − 1), must stay an integer float32 holds exactly (≤ 2²⁴)
// whatever order the communicator adds in — 16 bits up to 256 ranks, 8
// bits up to 65 793.
func limbBits(ranks int) (uint, error) {
	for _, bits := range []uint{16, 8} {
		if int64(ranks)*(1<<bits-1) <= 1<<24 {
			return bits, nil
		}
	}
	return 0, fmt.Errorf("exact sums over %d ranks: at most 65793", ranks)
}

// sumFloat64 sums float64 values over the ranks (each as two float32s,
// see split64).
func (j *job) sumFloat64(xs []float64) error {
	if j == nil || len(xs) == 0 {
		return nil
	}
	buf := make([]float32, 2*len(xs))
	for i, x := range xs {
		buf[2*i], buf[2*i+1] = split64(x)
	}
	if err := j.comm.AllReduceSum(j.ctx, buf); err != nil {
		return err
	}
	for i := range xs {
		xs[i] = float64(buf[2*i]) + float64(buf[2*i+1])
	}
	return nil
}

// diceFrac is the resolution of sumDiceSums: 2⁻⁴⁸.
const diceFrac = 1 << 48

// sumDiceSums sums a batch Dice's per-class sums (of probabilities and
// voxel counts: non-negative, and below the batch's voxel count) over the
// ranks, for nn.Criterion.SetBatchReducer. Each value is cut into its
// integer part and its fraction in units of 2⁻⁴⁸, and both are summed as
// integers (sumInt64, exact): the result is the exact sum of the values
// rounded to 2⁻⁴⁸ — every bit of a value ≥ 2⁻⁵, far more than the float32
// probabilities they sum carry — the same bits on every rank, whatever
// the order of the ranks. (split64's float32 halves would lose the bits
// below float32's 24 where the ranks' values are summed.) A value that is
// NaN, infinite, negative or ≥ 2⁵² (no Dice sum is) comes out NaN, so the
// step's loss is NaN on every rank, as one process's would be.
func (j *job) sumDiceSums(xs []float64) error {
	if j.size() == 1 {
		return nil
	}
	parts := make([]int64, 3*len(xs)) // integer part, fraction, bad
	for i, x := range xs {
		if !(x >= 0 && x < 1<<52) { // NaN fails both
			parts[3*i+2] = 1
			continue
		}
		ip := math.Floor(x)
		parts[3*i] = int64(ip)
		parts[3*i+1] = int64(math.Round((x - ip) * diceFrac))
	}
	if err := j.sumInt64(parts); err != nil {
		return err
	}
	for i := range xs {
		if parts[3*i+2] != 0 {
			xs[i] = math.NaN()
			continue
		}
		xs[i] = float64(parts[3*i]) + float64(parts[3*i+1])/diceFrac
	}
	return nil
}

// checkSame makes sure every rank starts from the same point: rank 0
// broadcasts the SHA-256 of its weights, optimiser state and data cursor,
// every rank compares it with its own, and the ranks sum their
// mismatches, so that all fail together, with the same message, when one
// differs (another seed, a checkpoint another rank could not read the
// same way).
func (j *job) checkSame(dev nn.Device, l *nn.Learner, st State) error {
	if j == nil {
		return nil
	}
	sum, err := stateDigest(dev, l, st)
	if err != nil {
		return err
	}
	root := sum
	if err := j.comm.Broadcast(j.ctx, root[:], 0); err != nil {
		return fmt.Errorf("compare the ranks' starting points: %w", err)
	}
	differ := make([]float32, j.comm.Size())
	if root != sum {
		differ[j.comm.Rank()] = 1
	}
	if err := j.comm.AllReduceSum(j.ctx, differ); err != nil {
		return fmt.Errorf("compare the ranks' starting points: %w", err)
	}
	var bad []string
	for r, d := range differ {
		if d != 0 {
			bad = append(bad, fmt.Sprint(r))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("the weights, optimiser state or data cursor of rank %s differ from rank 0's: every rank must start from the same seed and checkpoint (is the run directory on a file system every node sees?)",
			strings.Join(bad, ", "))
	}
	return nil
}

// stateDigest fingerprints what every rank must agree on at the start.
func stateDigest(dev nn.Device, l *nn.Learner, st State) ([32]byte, error) {
	h := sha256.New()
	ws, err := nn.ExportParams(dev, l.Model.Params())
	if err != nil {
		return [32]byte{}, err
	}
	os, err := l.Opt.State()
	if err != nil {
		return [32]byte{}, err
	}
	var b [4]byte
	for _, t := range append(ws, os...) {
		h.Write([]byte(t.Name))
		for _, x := range t.Data {
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(x))
			h.Write(b[:])
		}
	}
	cursor, _ := json.Marshal([]int64{int64(st.Epoch), int64(st.StepInEpoch), st.Step, int64(l.Opt.Steps())})
	h.Write(cursor)
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out, nil
}

// gather returns every rank's own bytes, by rank, on every rank: each
// rank in turn broadcasts its length, then its bytes.
func (j *job) gather(own []byte) ([][]byte, error) {
	out := make([][]byte, j.comm.Size())
	for r := range out {
		var n [8]byte
		if r == j.comm.Rank() {
			binary.LittleEndian.PutUint64(n[:], uint64(len(own)))
		}
		if err := j.comm.Broadcast(j.ctx, n[:], r); err != nil {
			return nil, err
		}
		buf := make([]byte, binary.LittleEndian.Uint64(n[:]))
		if r == j.comm.Rank() {
			copy(buf, own)
		}
		if len(buf) > 0 {
			if err := j.comm.Broadcast(j.ctx, buf, r); err != nil {
				return nil, err
			}
		}
		out[r] = buf
	}
	return out, nil
}

// shareOf returns rank r's cases of a sharded whole-case validation:
// every N-th, starting at r.
func shareOf[T any](all []T, r, n int) []T {
	var out []T
	for i := r; i < len(all); i += n {
		out = append(out, all[i])
	}
	return out
}

// gatherCases puts the ranks' scores of their shares (shareOf) of total
// cases back together, in the order of the cases, on every rank: the
// summary is then the one a single process computes, bit for bit.
func (j *job) gatherCases(mine []evaluation.Case, total int) ([]evaluation.Case, error) {
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(mine); err != nil {
		return nil, err
	}
	parts, err := j.gather(b.Bytes())
	if err != nil {
		return nil, err
	}
	shares := make([][]evaluation.Case, len(parts))
	for r, p := range parts {
		if err := gob.NewDecoder(bytes.NewReader(p)).Decode(&shares[r]); err != nil {
			return nil, fmt.Errorf("rank %d's validation scores: %w", r, err)
		}
	}
	n := len(parts)
	out := make([]evaluation.Case, 0, total)
	for i := range total {
		s := shares[i%n]
		if i/n >= len(s) {
			return nil, fmt.Errorf("rank %d scored %d validation cases, want %d", i%n, len(s), (total-i%n+n-1)/n)
		}
		out = append(out, s[i/n])
	}
	return out, nil
}
