package session

import (
	"context"
	"testing"
	"time"

	"github.com/commlab/commlab/scenarios"
)

// queueHost is a fakeHost whose environment waits in a batch queue until
// release is closed.
type queueHost struct {
	*fakeHost
	release chan struct{}
}

func (h queueHost) Up(ctx context.Context, env scenarios.Environment, ttl time.Duration, progress func(Progress)) (Env, error) {
	progress(Progress{Note: "pending", Queue: &Queue{Position: 2, Reason: "Priority"}})
	select {
	case <-h.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return h.fakeHost.Up(ctx, env, ttl, progress)
}

// TestQueueStopsTheClock: a lab waiting in its scheduler's queue shows where
// it stands, and its TTL does not run meanwhile (a job's time limit starts
// with the job): a lab queued for longer than its TTL still comes up, with
// its whole TTL ahead.
func TestQueueStopsTheClock(t *testing.T) {
	const ttl = 3 * time.Second
	h := queueHost{fakeHost: &fakeHost{workload: healthyThenFaulted}, release: make(chan struct{})}
	l := Start(context.Background(), Config{Provider: h, Faults: h.fakeHost, DataDir: t.TempDir(), TTL: ttl, NoStream: true, Log: quiet}, 1, testVariant(t))
	t.Cleanup(func() { l.Stop(); l.Wait() })
	st := waitFor(t, l, func(s Status) bool { return s.Queue != nil })
	if *st.Queue != (Queue{Position: 2, Reason: "Priority"}) || st.Step != StepQueued {
		t.Fatalf("queued lab: %+v", st)
	}
	time.Sleep(ttl + 500*time.Millisecond) // past the TTL, still queued
	if st2 := l.Status(); st2.State != Starting || !st2.Expires.After(st.Expires) {
		t.Fatalf("after its TTL in the queue the lab is %s, expiring %s (was %s): its clock ran", st2.State, st2.Expires, st.Expires)
	}
	released := time.Now()
	close(h.release)
	st = waitFor(t, l, func(s Status) bool { return s.State != Starting })
	if st.State != Ready || st.Queue != nil || st.Step == StepQueued {
		t.Fatalf("released lab: %+v", st)
	}
	if left := st.Expires.Sub(released); left < ttl/2 {
		t.Errorf("released lab expires %s after its release, want about its TTL %s", left, ttl)
	}
}
