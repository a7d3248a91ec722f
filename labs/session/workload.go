package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"
)

// ErrWorkloadFailed marks a workload run that ended in failure (as RoCE drops make it):
// it measures 0. Environments wrap a failed process's error with it.
var ErrWorkloadFailed = errors.New("the workload failed")

func (l *Lab) workloadEnv() []string {
	var env []string
	if w := l.Variant.Scenario.Workload; w != nil {
		for _, k := range slices.Sorted(maps.Keys(w.Env)) {
			env = append(env, k+"="+l.Variant.Expand(w.Env[k]))
		}
	}
	return env
}

// measure takes a figure the grader compares: it waits for the host to itself (the
// lab's Turns), then runs the workload once with the CPU first (Prioritizer), cut
// after limit (at most 3 minutes; 0 means 3 minutes), and returns its figure (GB/s).
// A workload that fails, or is cut, measures 0 with ErrWorkloadFailed; a cut run's
// error also wraps errCut.
func (l *Lab) measure(ctx context.Context, limit time.Duration) (bw float64, took time.Duration, err error) {
	release, err := l.cfg.Turns.Graded(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer release()
	l.mu.Lock()
	p, ok := l.env.(Prioritizer)
	l.mu.Unlock()
	if ok {
		// Without it the run is still taken, as fair a share as the host gives.
		if restore, err := p.Prioritize(); err != nil {
			l.log.Warn("graded run without CPU priority", "err", err)
		} else {
			defer func() {
				if err := restore(); err != nil {
					l.log.Warn("restore the CPU weight after a graded run", "err", err)
				}
			}()
		}
	}
	return l.runOnce(ctx, limit)
}

// sample runs the workload once for a figure only the chart shows or only compared
// as below a bar (a fault's self-test): another lab's load can only lower it, so it
// takes a chart's turn and leaves the host to the graded runs. See measure.
func (l *Lab) sample(ctx context.Context, limit time.Duration) (bw float64, took time.Duration, err error) {
	release, err := l.cfg.Turns.Chart(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer release()
	return l.runOnce(ctx, limit)
}

// errCut marks a run cut at its time limit.
var errCut = errors.New("cut at its time limit")

// runOnce runs the workload once, cut after limit (see measure), and says how long
// the run took (not counting the wait for the links).
func (l *Lab) runOnce(ctx context.Context, limit time.Duration) (float64, time.Duration, error) {
	l.wl.Lock()
	defer l.wl.Unlock()
	if err := ctx.Err(); err != nil {
		return 0, 0, err // cancelled while waiting for the links
	}
	l.mu.Lock()
	env := l.env
	l.mu.Unlock()
	if env == nil {
		return 0, 0, context.Canceled // the lab ended while this run waited for the links
	}
	if limit <= 0 || limit > 3*time.Minute {
		limit = 3 * time.Minute
	}
	mctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	start := time.Now()
	bw, err := env.Workload(mctx, l.Variant.Scenario.Workload, l.workloadEnv(), io.Discard)
	took := time.Since(start)
	if err != nil && ctx.Err() != nil {
		return 0, took, ctx.Err()
	}
	if err != nil && mctx.Err() != nil {
		return 0, took, fmt.Errorf("%w: %w: no result within %s", ErrWorkloadFailed, errCut, limit.Round(100*time.Millisecond))
	}
	if err != nil {
		return 0, took, err
	}
	return bw, took, nil
}

// streamWorkload runs the workload again and again while the lab is ready, pushing
// one sample per run to the chart. Between runs it rests as long as the run took (at
// least 2 s), so the nodes are idle at least half the time and the learner's own
// measurements (iperf3, a single-node test, a copy test on the GPU) see the fault
// rather than the chart's workload.
func (l *Lab) streamWorkload(ctx context.Context) {
	for ctx.Err() == nil {
		l.mu.Lock()
		st := l.state
		l.mu.Unlock()
		if st == Grading { // a check measures; the chart resumes after it
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		if st != Ready {
			return
		}
		start := time.Now()
		release, err := l.cfg.Turns.Stream(ctx) // graded runs, this lab's or another's, go first
		if err != nil {
			return
		}
		run, stop := context.WithCancel(ctx)
		l.mu.Lock()
		l.stopStream = stop
		l.mu.Unlock()
		bw, _, err := l.runOnce(run, 0)
		tookOver := run.Err() != nil // read before stop(), which cancels run too
		stop()
		release()
		if ctx.Err() != nil {
			return
		}
		if tookOver {
			continue // this lab's grading took the links: this run is not a sample
		}
		if err != nil && !errors.Is(err, ErrWorkloadFailed) {
			l.log.Warn("workload", "err", err)
		}
		l.samples.add(bw) // a failing run (a hang, RoCE retries exceeded) shows as zero
		select {
		case <-ctx.Done():
		case <-time.After(max(2*time.Second, time.Since(start))):
		}
	}
}

// Sample is one point of the busbw chart, or a fault event.
type Sample struct {
	Type  string  `json:"type"` // "sample" or "event"
	T     float64 `json:"t"`    // Unix seconds
	BusBW float64 `json:"busbw,omitempty"`
	Label string  `json:"label,omitempty"`
}

// Samples is a bounded time series with subscribers (the live chart).
type Samples struct {
	mu   sync.Mutex
	max  int
	list []Sample
	subs map[chan Sample]struct{}
}

func newSamples(max int) *Samples { return &Samples{max: max, subs: map[chan Sample]struct{}{}} }

func (s *Samples) add(bw float64) {
	s.push(Sample{Type: "sample", T: float64(time.Now().UnixMilli()) / 1000, BusBW: bw})
}

func (s *Samples) event(label string) {
	s.push(Sample{Type: "event", T: float64(time.Now().UnixMilli()) / 1000, Label: label})
}

func (s *Samples) push(x Sample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = append(s.list, x)
	if len(s.list) > s.max {
		s.list = s.list[len(s.list)-s.max:]
	}
	for ch := range s.subs {
		select {
		case ch <- x:
		default: // a slow chart misses a point; the next one comes soon
		}
	}
}

// Subscribe returns the samples so far and a channel of new ones.
func (s *Samples) Subscribe() ([]Sample, <-chan Sample, func()) {
	ch := make(chan Sample, 64)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subs[ch] = struct{}{}
	return append([]Sample(nil), s.list...), ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.subs, ch)
	}
}

// Measure runs the workload once now and returns its busbw (an instructor's "measure
// now", and tests). A failing workload measures 0.
func (l *Lab) Measure(ctx context.Context) (float64, error) {
	bw, _, err := l.measure(ctx, 0)
	return bw, err
}

// Baseline is the healthy busbw measured before the fault (0 when not measured).
func (l *Lab) Baseline() float64 { return l.baseline }
