package store_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/store"
)

// fakeLease counts its renewals; the first failN of them fail.
type fakeLease struct {
	renews atomic.Int64
	failN  int64
	lost   chan struct{}
	once   sync.Once
}

func newFakeLease() *fakeLease { return &fakeLease{lost: make(chan struct{})} }

func (l *fakeLease) Name() string          { return "test-lease" }
func (l *fakeLease) Epoch() int64          { return 7 }
func (l *fakeLease) Lost() <-chan struct{} { return l.lost }
func (l *fakeLease) Release() error        { l.once.Do(func() { close(l.lost) }); return nil }
func (l *fakeLease) Renew(context.Context) error {
	if n := l.renews.Add(1); n <= l.failN {
		return errors.New("database said no")
	}
	return nil
}

// logBuf is a goroutine-safe log sink.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *logBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *logBuf) count(sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), sub)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second) // a deadline, not a measurement
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond) // polling another goroutine's progress
	}
}

// keep runs KeepRenewed on a goroutine; the returned channel closes when
// it returns.
func keep(ctx context.Context, l store.Lease, stalled func() bool, log *slog.Logger) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		store.KeepRenewed(ctx, l, time.Millisecond, stalled, log)
	}()
	return done
}

func waitDone(t *testing.T, what string, done <-chan struct{}) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(20 * time.Second): // a deadline, not a measurement
		t.Fatalf("KeepRenewed did not return after %s", what)
	}
}

// A lease is renewed on its own timer, with no other prompt, until its
// context ends; and not a moment longer when the lease is lost.
func TestKeepRenewed_RenewsUntilTheContextEndsOrTheLeaseIsLost(t *testing.T) {
	l := newFakeLease()
	ctx, cancel := context.WithCancel(context.Background())
	done := keep(ctx, l, nil, nil)
	waitFor(t, "three renewals", func() bool { return l.renews.Load() >= 3 })
	cancel()
	waitDone(t, "its context ended", done)

	l2 := newFakeLease()
	done = keep(context.Background(), l2, nil, nil)
	waitFor(t, "a renewal", func() bool { return l2.renews.Load() >= 1 })
	l2.Release()
	waitDone(t, "its lease was lost", done)
}

// While stalled reports true no renewal is made (a standby may depose
// that holder); once it reports false renewals resume. The pause and the
// resumption are each logged once.
func TestKeepRenewed_SkipsWhileStalled(t *testing.T) {
	l := newFakeLease()
	var stuck atomic.Bool
	var skips atomic.Int64
	var atStall atomic.Int64 // renewals when the first skip happened
	stalled := func() bool {
		if !stuck.Load() {
			return false
		}
		if skips.Add(1) == 1 {
			atStall.Store(l.renews.Load())
		}
		return true
	}
	logs := &logBuf{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := keep(ctx, l, stalled, slog.New(slog.NewTextHandler(logs, nil)))
	waitFor(t, "a renewal", func() bool { return l.renews.Load() >= 1 })

	stuck.Store(true)
	// stalled runs on KeepRenewed's goroutine before each renewal: five
	// skipped rounds in a row, and no renewal among them.
	waitFor(t, "five rounds skipped", func() bool { return skips.Load() >= 5 })
	if got, at := l.renews.Load(), atStall.Load(); got != at {
		t.Fatalf("renewed while stalled: %d renewals at the first skip, %d after five", at, got)
	}
	stuck.Store(false)
	waitFor(t, "renewals resumed", func() bool { return l.renews.Load() >= atStall.Load()+2 })
	cancel()
	waitDone(t, "its context ended", done)
	if n := logs.count("lease renewals paused"); n != 1 {
		t.Errorf("%d pause lines, want 1:\n%s", n, logs.b.String())
	}
	if n := logs.count("lease renewals resumed"); n != 1 {
		t.Errorf("%d resume lines, want 1:\n%s", n, logs.b.String())
	}
}

// A renewal that fails is logged once however often it fails, and its
// recovery once.
func TestKeepRenewed_FailureAndRecoveryLoggedOnce(t *testing.T) {
	l := newFakeLease()
	l.failN = 4
	logs := &logBuf{}
	ctx, cancel := context.WithCancel(context.Background())
	done := keep(ctx, l, nil, slog.New(slog.NewTextHandler(logs, nil)))
	waitFor(t, "renewals past the failures", func() bool { return l.renews.Load() >= l.failN+3 })
	cancel()
	waitDone(t, "its context ended", done)
	if n := logs.count("renew the lease"); n != 1 {
		t.Errorf("%d failure lines for %d failures, want 1:\n%s", n, l.failN, logs.b.String())
	}
	if n := logs.count("lease renewed again"); n != 1 {
		t.Errorf("%d recovery lines, want 1:\n%s", n, logs.b.String())
	}
}

func TestRunClock_PastOnlyWhileARoundRuns(t *testing.T) {
	var c store.RunClock
	if c.Running() != 0 || c.Past(time.Nanosecond) {
		t.Fatal("a clock with no round running reports one")
	}
	c.Begin()
	if c.Past(0) {
		t.Error("Past(0) is true: a zero limit must stall nothing")
	}
	waitFor(t, "the round past 1 ms", func() bool { return c.Past(time.Millisecond) })
	if c.Past(time.Hour) {
		t.Error("a round just begun is past an hour")
	}
	c.End()
	if c.Running() != 0 || c.Past(time.Nanosecond) {
		t.Error("the clock still reports a round after End")
	}
}
