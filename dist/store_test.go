package dist

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

func startStore(t *testing.T) *Server {
	t.Helper()
	s, err := Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func dialStore(t *testing.T, addr string, rank int) *Store {
	t.Helper()
	c, err := Dial(context.Background(), addr, rank, 3, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestStoreSetGetAddWait(t *testing.T) {
	ctx := context.Background()
	s := startStore(t)
	a, b := dialStore(t, s.Addr(), 0), dialStore(t, s.Addr(), 1)
	// A get waits for another rank's set.
	got := make(chan []byte, 1)
	go func() {
		v, err := b.Get(ctx, "nccl-id", 5*time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- v
	}()
	time.Sleep(20 * time.Millisecond)
	id := []byte{0, 1, 2, 255, '\t', 0}
	if err := a.Set(ctx, "nccl-id", id); err != nil {
		t.Fatal(err)
	}
	if v := <-got; string(v) != string(id) {
		t.Errorf("get read %v, want %v", v, id)
	}
	if v, ok, err := b.TryGet(ctx, "nope"); err != nil || ok || v != nil {
		t.Errorf("TryGet of an unset key: %v %v %v", v, ok, err)
	}
	// Add counts from every rank at once.
	var wg sync.WaitGroup
	for _, c := range []*Store{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Add(ctx, "joined", 2); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n, err := a.Add(ctx, "joined", 0); err != nil || n != 8 {
		t.Errorf("add: %d, %v; want 8", n, err)
	}
	if v, err := b.Get(ctx, "joined", 0); err != nil || string(v) != "8" {
		t.Errorf("an added key reads %q, %v", v, err)
	}
	if _, err := a.Add(ctx, "nccl-id", 1); err == nil || !strings.Contains(err.Error(), `"nccl-id"`) {
		t.Errorf("add to bytes: %v", err)
	}
	go func() { time.Sleep(20 * time.Millisecond); a.Set(ctx, "k2", []byte("x")) }()
	if err := b.Wait(ctx, []string{"nccl-id", "k2"}, 5*time.Second); err != nil {
		t.Error(err)
	}
}

func TestStoreTimeoutsNameRankAddressAndKey(t *testing.T) {
	ctx := context.Background()
	s := startStore(t)
	c := dialStore(t, s.Addr(), 2)
	start := time.Now()
	_, err := c.Get(ctx, "addr/1", 100*time.Millisecond)
	if !errors.Is(err, ErrTimeout) || time.Since(start) > 30*time.Second { // a hang guard
		t.Fatalf("get of a key never set: %v after %v", err, time.Since(start))
	}
	for _, want := range []string{"rank 2 of 3", `"addr/1"`, s.Addr(), "100ms"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	if err := c.Wait(ctx, []string{"x"}, 50*time.Millisecond); !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), `"x"`) {
		t.Errorf("wait: %v", err)
	}
	// A cancelled context ends a get at once.
	cctx, cancel := context.WithCancel(ctx)
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	if _, err := c.Get(cctx, "never", time.Minute); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled get: %v", err)
	}
	// Nobody listening: Dial retries, then names the rank and address.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	_, err = Dial(ctx, addr, 1, 4, 300*time.Millisecond)
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "rank 1 of 4 could not reach the store at "+addr+" within 300ms") {
		t.Errorf("dial with no store: %v", err)
	}
	// A store that starts late is reached.
	ln, _ = net.Listen("tcp", "127.0.0.1:0")
	addr = ln.Addr().String()
	ln.Close()
	go func() {
		time.Sleep(150 * time.Millisecond)
		if late, err := Serve(addr); err == nil {
			t.Cleanup(func() { late.Close() })
		}
	}()
	if c, err := Dial(ctx, addr, 1, 4, 5*time.Second); err != nil {
		t.Errorf("dial before the store started: %v", err)
	} else {
		c.Close()
	}
}

// A watch connection that drops without goodbye sets the abort key naming
// its rank; one that says goodbye does not.
func TestStoreAbortsWhenAWatchedRankDrops(t *testing.T) {
	ctx := context.Background()
	s := startStore(t)
	c := dialStore(t, s.Addr(), 0)
	hello := func(rank int) *Store {
		w := dialStore(t, s.Addr(), rank)
		if _, err := w.do(ctx, message{op: opHello, key: "10.0.0.7:4100", val: []byte("watch"), arg: int64(rank)}, 0); err != nil {
			t.Fatal(err)
		}
		return w
	}
	polite := hello(1)
	polite.bye()
	polite.Close()
	time.Sleep(50 * time.Millisecond)
	if _, ok, _ := c.TryGet(ctx, abortKey); ok {
		t.Fatal("a rank that said goodbye aborted the job")
	}
	hello(2).Close()
	v, err := c.Get(ctx, abortKey, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeFault(v).Error(); got != "rank 2 (10.0.0.7:4100) closed its connection during " {
		t.Errorf("abort reads %q", got)
	}
	if !s.WaitIdle(time.Second) {
		t.Error("watch connections still counted after they closed")
	}
}
