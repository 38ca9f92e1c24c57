package trainer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/dist"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/nn"
)

// startJob joins n ranks, goroutines of this process, over localhost TCP.
func startJob(t testing.TB, n int) []dist.Comm {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	comms := make([]dist.Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			env := dist.Env{Rank: r, WorldSize: n, LocalRank: r, LocalWorldSize: n, MasterAddr: "127.0.0.1", MasterPort: port}
			comms[r], errs[r] = dist.Init(context.Background(), env, dist.Options{})
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return comms
}

// distConfig is tinyConfig with a per-rank batch, the same splits file and
// output directory for every rank, nnU-Net's loss with per-sample Dice,
// and mods' changes.
func distConfig(t *testing.T, out, splits string, batch int, mods ...func(*config.Config)) *config.Config {
	c := tinyConfig(t, out)
	c.Data.SplitsFile = splits
	c.Train.BatchSize = batch
	c.Loss.BatchDice = false
	for _, m := range mods {
		m(c)
	}
	if testutil.Race {
		// The communicator and the job's calls under the race detector;
		// the numbers need fewer steps and no sliding window.
		c.Train.Epochs, c.Validation.Mode = 1, "patch"
	}
	return c
}

// sampleLog records, per rank, the global sample indices (epoch, index)
// each step consumed.
type sampleLog struct {
	mu    sync.Mutex
	steps map[[2]int][]data.Sample // (epoch, step) → the global batch, rank order
}

func (l *sampleLog) hook(rank, ranks int) func(epoch, step int, s []data.Sample) {
	return func(epoch, step int, s []data.Sample) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.steps == nil {
			l.steps = map[[2]int][]data.Sample{}
		}
		k := [2]int{epoch, step}
		g := l.steps[k]
		if g == nil {
			g = make([]data.Sample, ranks*len(s))
		}
		copy(g[rank*len(s):], s)
		l.steps[k] = g
	}
}

// runJob runs one training on n ranks (goroutines joined over TCP; n = 1:
// no job) with batch b each and distConfig changed by mods, and returns
// rank 0's result.
func runJob(t *testing.T, out, splits string, n, b int, o Options, log *sampleLog, mods ...func(*config.Config)) (*Result, error) {
	res, errs := runRanks(t, out, splits, n, b, func(int, *Options) {}, o, log, mods...)
	for r := 1; r < n; r++ {
		if (errs[r] == nil) != (errs[0] == nil) || res[r].Steps != res[0].Steps || res[r].Epochs != res[0].Epochs {
			t.Errorf("rank %d ended with %v after %d steps, rank 0 with %v after %d", r, errs[r], res[r].Steps, errs[0], res[0].Steps)
		}
	}
	return res[0], errs[0]
}

// runRanks runs one training on n ranks, each with o changed by perRank
// and distConfig by mods, and returns every rank's result and error.
func runRanks(t *testing.T, out, splits string, n, b int, perRank func(int, *Options), o Options, log *sampleLog, mods ...func(*config.Config)) ([]*Result, []error) {
	t.Helper()
	var comms []dist.Comm
	if n > 1 {
		comms = startJob(t, n)
	}
	res := make([]*Result, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ro := o
			ro.Device = cpu.New(cpu.Options{Threads: 1})
			ro.Out = testWriter{t, fmt.Sprintf("rank %d: ", r)}
			if n > 1 {
				ro.Comm = comms[r]
			}
			if log != nil {
				ro.onSamples = log.hook(r, n)
			}
			perRank(r, &ro)
			res[r], errs[r] = Run(context.Background(), distConfig(t, out, splits, b, mods...), ro)
		}()
	}
	wg.Wait()
	for _, c := range comms {
		go c.Close() // rank 0 waits for the others to leave
	}
	return res, errs
}

type testWriter struct {
	t      *testing.T
	prefix string
}

func (w testWriter) Write(p []byte) (int, error) {
	if testing.Verbose() {
		w.t.Logf("%s%s", w.prefix, p)
	}
	return len(p), nil
}

// closeTo compares weights within float summation tolerance: the ranks'
// gradients are summed in another order than one process's batch.
func closeTo(t *testing.T, what string, a, b []nn.HostTensor, rel float64) {
	t.Helper()
	worst := 0.0
	for i := range a {
		for k := range a[i].Data {
			d := math.Abs(float64(a[i].Data[k]) - float64(b[i].Data[k]))
			worst = max(worst, d/max(1e-3, math.Abs(float64(a[i].Data[k]))))
		}
	}
	t.Logf("%s: largest relative difference %.2g", what, worst)
	if worst > rel {
		t.Errorf("%s differ by up to %.3g (relative), want ≤ %g", what, worst, rel)
	}
}

// Two ranks with batch 1 train the weights one process with batch 2 does,
// up to float summation order, through validation and checkpoints; every
// rank logs the same numbers, and only rank 0 writes. With per-sample
// Dice the ranks' averaged gradients are the global batch's as they are;
// with batch Dice and clDice because the ranks sum their statistics over
// the job (nn.Criterion.SetBatchReducer) and scale their gradients.
func TestTwoRanksMatchOneProcessWithTheGlobalBatch(t *testing.T) {
	if testing.Short() {
		t.Skip("trains four times")
	}
	for _, tc := range []struct {
		name string
		mod  func(*config.Config)
	}{
		{"per-sample Dice", func(*config.Config) {}},
		{"batch Dice", func(c *config.Config) { c.Loss.BatchDice = true }},
		{"clDice", func(c *config.Config) { c.Loss.Name = "cldice" }},
	} {
		t.Run(tc.name, func(t *testing.T) { twoRanksMatchOne(t, tc.mod) })
	}
}

func twoRanksMatchOne(t *testing.T, mod func(*config.Config)) {
	splits := filepath.Join(t.TempDir(), "splits.json")
	one, err := runJob(t, t.TempDir(), splits, 1, 2, Options{}, nil, mod)
	if err != nil {
		t.Fatal(err)
	}
	two, err := runJob(t, t.TempDir(), splits, 2, 1, Options{}, nil, mod)
	if err != nil {
		t.Fatal(err)
	}
	if epochs := distConfig(t, t.TempDir(), splits, 1).Train.Epochs; two.Steps != int64(3*epochs) || two.Epochs != epochs {
		t.Fatalf("two ranks: %+v", two)
	}
	c := distConfig(t, t.TempDir(), splits, 2, mod)
	m1, o1 := loadFinal(t, c, one.RunDir)
	m2, o2 := loadFinal(t, c, two.RunDir)
	closeTo(t, "weights", m1, m2, 1e-4)
	closeTo(t, "optimiser state", o1, o2, 1e-3)
	e1, e2 := metricsLines(t, one.RunDir), metricsLines(t, two.RunDir)
	if len(e1) != two.Epochs || len(e2) != two.Epochs {
		t.Fatalf("metrics lines: one process %d, two ranks %d (rank 0 alone writes)", len(e1), len(e2))
	}
	for i := range e1 {
		if d := math.Abs(float64(e1[i].TrainLoss - e2[i].TrainLoss)); d > 1e-4 {
			t.Errorf("epoch %d: train loss %v on two ranks, %v on one", i+1, e2[i].TrainLoss, e1[i].TrainLoss)
		}
		if d := math.Abs(float64(*e1[i].ValLoss - *e2[i].ValLoss)); d > 1e-4 {
			t.Errorf("epoch %d: validation loss %v on two ranks, %v on one", i+1, *e2[i].ValLoss, *e1[i].ValLoss)
		}
		// The sliding-window Dice: each rank scored half the cases.
		if len(e1[i].ValDice) != len(e2[i].ValDice) || len(e2[i].ValDice) == 0 {
			t.Fatalf("epoch %d: validation Dice %v on two ranks, %v on one", i+1, e2[i].ValDice, e1[i].ValDice)
		}
		for k := range e1[i].ValDice {
			if d := math.Abs(float64(e1[i].ValDice[k] - e2[i].ValDice[k])); d > 1e-3 {
				t.Errorf("epoch %d: class %d's validation Dice %v on two ranks, %v on one", i+1, k+1, e2[i].ValDice[k], e1[i].ValDice[k])
			}
		}
	}
}

// Resumed on 1, then 2, then 3 ranks with the same global batch (6), a
// run takes the exact sample sequence one process takes, and ends with
// its weights (up to summation order).
func TestResumeOnOtherWorldSizesContinuesTheSequence(t *testing.T) {
	if testing.Short() {
		t.Skip("trains four times")
	}
	testutil.SkipUnderRace(t, "trains four times")
	splits := filepath.Join(t.TempDir(), "splits.json")
	var straightLog, splitLog sampleLog
	straight, err := runJob(t, t.TempDir(), splits, 1, 6, Options{}, &straightLog)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	var in *Interrupted
	if _, err := runJob(t, out, splits, 1, 6, Options{StopAfterSteps: 2}, &splitLog); !errors.As(err, &in) || in.Step != 2 {
		t.Fatalf("1 rank: %v", err)
	}
	if _, err := runJob(t, out, splits, 2, 3, Options{StopAfterSteps: 2, Resume: "auto"}, &splitLog); !errors.As(err, &in) || in.Step != 4 {
		t.Fatalf("2 ranks: %v", err)
	}
	res, err := runJob(t, out, splits, 3, 2, Options{Resume: "auto"}, &splitLog)
	if err != nil || res.Steps != 6 {
		t.Fatalf("3 ranks: %v, %+v", err, res)
	}
	if len(straightLog.steps) != 6 || len(splitLog.steps) != 6 {
		t.Fatalf("steps recorded: %d straight, %d split", len(straightLog.steps), len(splitLog.steps))
	}
	for k, want := range straightLog.steps {
		if got := splitLog.steps[k]; !slices.Equal(got, want) {
			t.Errorf("epoch %d step %d: samples %v after resumes, %v straight", k[0], k[1], got, want)
		}
	}
	c := distConfig(t, t.TempDir(), splits, 6)
	ms, _ := loadFinal(t, c, straight.RunDir)
	mr, _ := loadFinal(t, c, res.RunDir)
	closeTo(t, "weights", ms, mr, 1e-4)
}

// A stop on one rank (here its step limit; a signal alike) stops every
// rank after the same step, the others with ErrPeerStopped, and rank 0
// saves last once.
func TestOneRankStoppingStopsAll(t *testing.T) {
	if testing.Short() {
		t.Skip("trains")
	}
	splits := filepath.Join(t.TempDir(), "splits.json")
	out := t.TempDir()
	res, errs := runRanks(t, out, splits, 2, 1, func(r int, o *Options) {
		if r == 1 {
			o.StopAfterSteps = 2
		}
	}, Options{}, nil)
	var in0, in1 *Interrupted
	if !errors.As(errs[0], &in0) || !errors.As(errs[1], &in1) || in0.Step != 2 || in1.Step != 2 ||
		!errors.Is(errs[0], ErrPeerStopped) || !errors.Is(errs[1], ErrStepLimit) {
		t.Fatalf("rank 0: %v; rank 1: %v", errs[0], errs[1])
	}
	c := distConfig(t, t.TempDir(), splits, 1)
	loadFinal(t, c, res[0].RunDir)
	if n := len(testutil.DirNames(t, filepath.Join(res[0].RunDir, "checkpoints"))); n != 2 { // ckpt-… and last
		t.Errorf("checkpoints: %v", testutil.DirNames(t, filepath.Join(res[0].RunDir, "checkpoints")))
	}
}

// sumDiceSums gives every rank the same bits, within 2⁻⁴⁸ per rank of
// the exact sum, even where a sum of float32 halves (split64) would lose
// the bits below float32's 24 (the first value: 5e6 + 0.5 + 0.3 + 0.3,
// where float32's spacing is 0.5); a NaN, negative or huge value on one
// rank makes that value NaN on all.
func TestSumDiceSumsOverRanks(t *testing.T) {
	const n = 3
	comms := startJob(t, n)
	defer func() {
		for _, c := range comms {
			go c.Close()
		}
	}()
	in := func(r int) []float64 {
		xs := []float64{[]float64{5e6 + 0.5, 0.3, 0.3}[r], 1e3 + float64(r+1)/3, 1e-3 * float64(r+1), 0, 7, 8, 9}
		switch r {
		case 0:
			xs[4] = math.NaN()
		case 1:
			xs[5] = -1e-9
		case 2:
			xs[6] = 1 << 53
		}
		return xs
	}
	out := make([][]float64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j := &job{comm: comms[r], ctx: context.Background()}
			out[r] = in(r)
			errs[r] = j.sumDiceSums(out[r])
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for i := range out[0] {
		if i >= 4 {
			if !math.IsNaN(out[0][i]) {
				t.Errorf("value %d: %v, want NaN (one rank's is not a Dice sum)", i, out[0][i])
			}
			continue
		}
		exact := new(big.Float).SetPrec(200)
		for r := range n {
			exact.Add(exact, new(big.Float).SetFloat64(in(r)[i]))
		}
		want, _ := exact.Float64()
		if d := math.Abs(out[0][i] - want); d > n*math.Ldexp(1, -49)+math.Abs(want)*0x1p-53 {
			t.Errorf("value %d: %v, exact sum %v (off by %.3g)", i, out[0][i], want, d)
		}
		for r := 1; r < n; r++ {
			if math.Float64bits(out[r][i]) != math.Float64bits(out[0][i]) {
				t.Errorf("value %d: rank %d has %v, rank 0 %v", i, r, out[r][i], out[0][i])
			}
		}
	}
}

// sameRanks is a communicator of size ranks whose ranks all hold this
// rank's values: its all-reduce adds them ranks times in float32, in
// order, as a real job's would round.
type sameRanks struct {
	dist.Comm
	ranks int
}

func (s sameRanks) Size() int { return s.ranks }

func (s sameRanks) AllReduceSum(_ context.Context, buf []float32) error {
	for i, v := range buf {
		var sum float32
		for range s.ranks {
			sum += v
		}
		buf[i] = sum
	}
	return nil
}

// sumInt64 is exact past 256 ranks (where 16-bit limbs would overflow
// float32's 24 bits) with values using every bit up to 2⁴⁶, and refuses a
// job too big for any limb width.
func TestSumInt64IsExactOnLargeJobs(t *testing.T) {
	xs := []int64{1<<46 - 1, 0xffff_ffff, 65535, 1}
	for _, ranks := range []int{1, 2, 256, 257, 1000, 65793} {
		j := &job{comm: sameRanks{ranks: ranks}, ctx: context.Background()}
		got := append([]int64(nil), xs...)
		if err := j.sumInt64(got); err != nil {
			t.Fatalf("%d ranks: %v", ranks, err)
		}
		for i, x := range xs {
			if want := x * int64(ranks); got[i] != want {
				t.Errorf("%d ranks: %d summed is %d, want %d", ranks, x, got[i], want)
			}
		}
	}
	j := &job{comm: sameRanks{ranks: 65794}, ctx: context.Background()}
	if err := j.sumInt64([]int64{1}); err == nil || !strings.Contains(err.Error(), "65794 ranks") {
		t.Fatalf("65794 ranks: %v, want an error naming the job's size", err)
	}
}
