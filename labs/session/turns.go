package session

import (
	"context"
	"sync"
	"time"
)

// Turns lets the labs of one host take turns with the workload runs the grader
// compares. The labs share the host's CPUs, so a graded figure (a baseline, a
// self-test, a re-measure after a fix) is taken with no other lab's workload
// running: a graded run waits for the graded run before it and for the live chart's
// runs in flight (cancelling those still running after Grace: a run that hangs on its
// fault until a timeout), and no chart run starts while one holds or waits for the
// host. Chart runs share the host with each other; they are not cut at once because
// a lab's evidence (a timeout's log lines) may come at the end of a long run. The zero
// value is ready to use; a nil *Turns coordinates nothing (labs whose workloads run
// elsewhere, a Slurm job's nodes).
type Turns struct {
	// Grace is how long a graded run lets chart runs in flight finish; 0 means 30 s.
	Grace time.Duration

	mu      sync.Mutex
	changed chan struct{} // closed and replaced whenever the host's state changes
	graded  bool          // a graded run holds the host
	waiting int           // graded runs waiting for their turn
	charts  map[*int]context.CancelFunc
}

// Graded waits for the host to itself and returns the function that gives it back.
// It fails only when ctx ends first.
func (t *Turns) Graded(ctx context.Context) (release func(), err error) {
	if t == nil {
		return func() {}, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.waiting++
	free := func() bool { return !t.graded && len(t.charts) == 0 }
	grace := t.Grace
	if grace <= 0 {
		grace = 30 * time.Second
	}
	graceCtx, cancel := context.WithTimeout(ctx, grace)
	err = t.wait(graceCtx, free)
	cancel()
	if err != nil && ctx.Err() == nil {
		for _, cancel := range t.charts {
			cancel() // the chart misses a point; its run would have spoiled the figure
		}
		err = t.wait(ctx, free)
	}
	t.waiting--
	if err != nil {
		t.notify() // chart runs held back by this wait may go
		return nil, err
	}
	t.graded = true
	return sync.OnceFunc(func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.graded = false
		t.notify()
	}), nil
}

// Chart waits until no graded run holds or waits for the host and returns the
// context to run under, which a graded run cancels when it wants the host, and the
// function to call when the run is over. It fails only when ctx ends first.
func (t *Turns) Chart(ctx context.Context) (run context.Context, release func(), err error) {
	if t == nil {
		return ctx, func() {}, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.wait(ctx, func() bool { return !t.graded && t.waiting == 0 }); err != nil {
		return nil, nil, err
	}
	run, cancel := context.WithCancel(ctx)
	key := new(int)
	if t.charts == nil {
		t.charts = map[*int]context.CancelFunc{}
	}
	t.charts[key] = cancel
	return run, sync.OnceFunc(func() {
		cancel()
		t.mu.Lock()
		defer t.mu.Unlock()
		delete(t.charts, key)
		t.notify()
	}), nil
}

// wait, with t.mu held, returns once ok holds, or ctx's cause when it ends first.
func (t *Turns) wait(ctx context.Context, ok func() bool) error {
	for !ok() {
		if t.changed == nil {
			t.changed = make(chan struct{})
		}
		changed := t.changed
		t.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
		}
		t.mu.Lock()
		if ctx.Err() != nil && !ok() {
			return context.Cause(ctx)
		}
	}
	return nil
}

// notify, with t.mu held, wakes every wait.
func (t *Turns) notify() {
	if t.changed != nil {
		close(t.changed)
		t.changed = nil
	}
}
