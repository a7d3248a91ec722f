package session

import (
	"context"
	"runtime"
	"sync"
	"time"
)

// Turns lets the labs of one host take turns with the workload runs the grader
// compares. The labs share the host's CPUs, so a graded figure (a baseline, a
// self-test, a re-measure after a fix) is taken with no other lab's workload
// running: a graded run waits for the graded run before it and for the live chart's
// runs in flight, and no chart run starts while one holds or waits for the host
// (unless it has waited Patience).
// Chart runs share the host with each other and are never cut by another lab (a lab's
// evidence may come at the end of a long run: a timeout's log lines); a graded run
// waits for them at most Grace, since a run that long is waiting on its fault (a hung
// bootstrap, retries), not using the CPU. The zero value is ready to use; a nil *Turns
// coordinates nothing (labs whose workloads run elsewhere, a Slurm job's nodes).
type Turns struct {
	// Grace is how long a graded run waits for chart runs in flight; 0 means 5 s.
	Grace time.Duration
	// Patience is how long a chart run waits for graded runs before it starts beside
	// them; 0 means 20 s. A lab's evidence comes from its chart runs, so a queue of
	// other labs' gradings must not starve it.
	Patience time.Duration
	// Charts is how many streaming chart runs (Stream) may run at once; 0 means no
	// limit. A class's labs each stream their workload, and on a small host they would
	// take every CPU from the learners' shells and the server (HostCharts sizes it). A
	// lab's start (Chart) is not held back by it.
	Charts int

	mu      sync.Mutex
	changed chan struct{} // closed and replaced whenever the host's state changes
	graded  bool          // a graded run holds the host
	waiting int           // graded runs waiting for their turn
	charts  int           // chart runs in flight
	streams int           // of which streaming runs
}

// Graded waits for the host and returns the function that gives it back. It fails
// only when ctx ends first.
func (t *Turns) Graded(ctx context.Context) (release func(), err error) {
	if t == nil {
		return func() {}, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.waiting++
	grace := t.Grace
	if grace <= 0 {
		grace = 5 * time.Second
	}
	graceCtx, cancel := context.WithTimeout(ctx, grace)
	err = t.wait(graceCtx, func() bool { return !t.graded && t.charts == 0 })
	cancel()
	if err != nil && ctx.Err() == nil {
		err = t.wait(ctx, func() bool { return !t.graded }) // the charts left are waiting, not running
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

// Chart waits until no graded run holds or waits for the host, at most Patience, and
// returns the function to call when the chart's run is over. It fails only when ctx
// ends first.
func (t *Turns) Chart(ctx context.Context) (release func(), err error) {
	return t.chart(ctx, false)
}

// Stream is Chart for one of a lab's streaming runs: it also waits for room under
// Charts, even once its patience is spent.
func (t *Turns) Stream(ctx context.Context) (release func(), err error) {
	return t.chart(ctx, true)
}

func (t *Turns) chart(ctx context.Context, capped bool) (release func(), err error) {
	if t == nil {
		return func() {}, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	patience := t.Patience
	if patience <= 0 {
		patience = 20 * time.Second
	}
	room := func() bool { return !capped || t.Charts <= 0 || t.streams < t.Charts }
	pctx, cancel := context.WithTimeout(ctx, patience)
	err = t.wait(pctx, func() bool { return !t.graded && t.waiting == 0 && room() })
	cancel()
	if err != nil && ctx.Err() == nil {
		err = t.wait(ctx, room) // patience spent: beside graded runs, never past the limit
	}
	if err != nil {
		return nil, err
	}
	t.charts++
	if capped {
		t.streams++
	}
	return sync.OnceFunc(func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.charts--
		if capped {
			t.streams--
		}
		t.notify()
	}), nil
}

// HostCharts is a host's default Turns.Charts: half its CPUs, at least one.
func HostCharts() int { return max(1, runtime.NumCPU()/2) }

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
