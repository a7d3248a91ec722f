package session

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/commlab/commlab/grader"
	"github.com/commlab/commlab/injector"
	"github.com/commlab/commlab/scenarios"
)

// Transcripts parses every terminal's recording.
func (l *Lab) Transcripts() ([]grader.Transcript, error) {
	l.mu.Lock()
	terms := make([]*Terminal, 0, len(l.terminals))
	for _, t := range l.terminals {
		terms = append(terms, t)
	}
	l.mu.Unlock()
	sort.Slice(terms, func(i, j int) bool { return terms[i].Node < terms[j].Node })
	var out []grader.Transcript
	for _, t := range terms {
		cmds, err := t.Commands()
		if err != nil {
			return nil, fmt.Errorf("read the recording of %s: %w", t.Node, err)
		}
		out = append(out, grader.Transcript{Terminal: t.Node, Node: t.Node, Commands: cmds})
	}
	return out, nil
}

// ErrNoChecksLeft is returned by Check once MaxChecks checks have been used.
var ErrNoChecksLeft = errors.New("no answer checks left: submit your final answer")

// Check grades a diagnosis without ending the lab: the learner sees which criteria
// hold, nothing of the answer. Each check costs grader.CheckCost at the final grading.
func (l *Lab) Check(ctx context.Context, d grader.Diagnosis) (grader.Result, error) {
	return l.CheckWithin(ctx, d, 0)
}

// CheckWithin is Check with the re-measure cut after cut (from the run's start, not
// counting the wait for its turn) instead of the grading's margin for a busy host; 0
// means that margin. A run cut measures nothing: not fixed. Given NoFixAfter, a
// check shows in seconds that a fix that does not fix is not one, on a quiet host.
func (l *Lab) CheckWithin(ctx context.Context, d grader.Diagnosis, cut time.Duration) (grader.Result, error) {
	l.mu.Lock()
	if l.checks >= MaxChecks {
		l.mu.Unlock()
		return grader.Result{}, ErrNoChecksLeft
	}
	l.mu.Unlock()
	res, err := l.grade(ctx, d, false, cut)
	if err != nil {
		return res, err
	}
	l.mu.Lock()
	l.checks++
	l.lastCheck = &res
	l.mu.Unlock()
	return res, nil
}

// Grade scores the final diagnosis and ends the lab: the faults are reverted and the
// environment goes down. When the lab has a remediation check, the workload is
// measured again first (the learner's fix must already be in place).
func (l *Lab) Grade(ctx context.Context, d grader.Diagnosis) (grader.Result, error) {
	res, err := l.grade(ctx, d, true, 0)
	if err != nil {
		return res, err
	}
	l.cancel() // teardown: revert and down
	return res, nil
}

// grade waits for the self-test, then grades. Whatever goes wrong (ctx done, a failed
// measurement), the lab is back to Ready: a learner is never left stuck in Grading.
func (l *Lab) grade(ctx context.Context, d grader.Diagnosis, final bool, cut time.Duration) (grader.Result, error) {
	// The lab's own end cancels a grading in flight too.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(l.ctx, cancel)()
	select {
	case <-l.confirmed:
	case <-ctx.Done():
		return grader.Result{}, fmt.Errorf("%w: the self-test has not finished (%v)", ErrNotReady, context.Cause(ctx))
	}

	l.mu.Lock()
	if l.state != Ready {
		st := l.state
		l.mu.Unlock()
		return grader.Result{}, fmt.Errorf("%w (it is %s)", ErrNotReady, st)
	}
	l.state = Grading
	if l.stopStream != nil {
		l.stopStream() // the chart's run in flight gives way to the measurement
	}
	checks := l.checks
	l.mu.Unlock()
	done := false
	defer func() {
		l.mu.Lock()
		if l.state == Grading {
			l.state = Ready
			if done && final {
				l.state = Done
			}
		}
		l.mu.Unlock()
	}()

	ts, err := l.Transcripts()
	if err != nil {
		return grader.Result{}, err
	}
	in := grader.Input{Variant: l.Variant, Diagnosis: d, Transcripts: ts, HintsUsed: l.HintsUsed(), Checks: checks}
	if r := l.Variant.Scenario.Remediation; r != nil && l.baseline > 0 {
		// One run can be unlucky on a busy host: a second chance before saying "not
		// fixed", unless the first run is still nearer the faulted level than the bar
		// (the fault is plainly still there), which keeps grading an unfixed lab short.
		bar := r.Bar(l.baseline, l.faulted)
		var after float64
		for try := 0; try < 2 && after < bar && (try == 0 || after > (l.faulted+bar)/2); try++ {
			bw, err := l.remeasure(ctx, bar/l.baseline, cut)
			if ctx.Err() != nil {
				return grader.Result{}, fmt.Errorf("re-measure after the fix: %w", context.Cause(ctx))
			}
			if err != nil && !errors.Is(err, ErrWorkloadFailed) {
				return grader.Result{}, fmt.Errorf("re-measure after the fix: %w", err)
			}
			after = max(after, bw)
		}
		in.Remediation = &grader.Measurement{Baseline: l.baseline, Faulted: l.faulted, After: after}
		if r.KeepMbit > 0 {
			if in.Remediation.Kept, err = l.neighbourFlows(ctx); err != nil {
				return grader.Result{}, fmt.Errorf("measure the neighbour's flows after the fix: %w", err)
			}
		}
	}
	if r := l.Variant.Scenario.Remediation; r != nil && r.Measure == scenarios.MeasureAlertRules {
		tests, err := scenarios.AlertTests(r.Tests)
		if err != nil {
			return grader.Result{}, err
		}
		l.mu.Lock()
		env := l.env
		l.mu.Unlock()
		if in.Rules, err = gradeAlertRules(ctx, env, tests); err != nil {
			return grader.Result{}, fmt.Errorf("test the alerting rules: %w", err)
		}
	}
	res, err := grader.Grade(in)
	if err != nil {
		return grader.Result{}, err
	}
	if final {
		l.mu.Lock()
		l.result = &res
		l.mu.Unlock()
	}
	done = true
	return res, nil
}

// remeasure runs the workload once for grading, cut once it has run far longer than a
// run that could still pass: busbw falls as the run time grows, so a run slower than
// the healthy one divided by the remediation's ratio cannot reach the bar. The cut
// allows twice that plus 5 s, because a run's wall time also counts process start and
// bootstrap, which a busy host stretches while the timed busbw stays fine (a right fix
// was cut at 1× + 2 s on a host at load 40). An unfixed lab is still known as not
// fixed within seconds of that, even when the fault hangs the workload (a blocked
// bootstrap, RoCE retries) until its own timeout.
func (l *Lab) remeasure(ctx context.Context, minRatio float64, cut time.Duration) (float64, error) {
	if cut <= 0 {
		cut = l.cutAfter(minRatio)
	}
	bw, _, err := l.measure(ctx, cut)
	if errors.Is(err, errCut) {
		return 0, fmt.Errorf("%w (the healthy run took %s)", err, l.baselineTook.Round(100*time.Millisecond))
	}
	return bw, err
}

// cutAfter is how long a run may take and still reach minRatio of the healthy
// figure (see remeasure).
func (l *Lab) cutAfter(minRatio float64) time.Duration {
	return time.Duration(2*float64(l.baselineTook)/minRatio) + 5*time.Second
}

// slowerThanAFix is how long a run takes that no fix could pass with: the healthy
// run's time divided by the remediation's ratio, and 2 s for process start. Only the
// self-test is cut there; a fix is given the margin of cutAfter.
func (l *Lab) slowerThanAFix(minRatio float64) time.Duration {
	return time.Duration(float64(l.baselineTook)/minRatio) + 2*time.Second
}

// NoFixAfter is how long a re-measure of this lab runs, on a quiet host, before it
// has shown that no fix is in place: slowerThanAFix at the grading's bar. 0 until the
// lab is confirmed, or when it measures no fix. See CheckWithin.
func (l *Lab) NoFixAfter() time.Duration {
	r := l.Variant.Scenario.Remediation
	select {
	case <-l.confirmed:
	default:
		return 0
	}
	if r == nil || l.baseline <= 0 {
		return 0
	}
	return l.slowerThanAFix(r.Bar(l.baseline, l.faulted) / l.baseline)
}

// neighbourFlows measures, for a few seconds after the workload, what each flow of the
// lab's congestion faults still delivers to its receiver (Mbit/s), where the learner's
// fix must have isolated the neighbour, not blocked it.
func (l *Lab) neighbourFlows(ctx context.Context) ([]float64, error) {
	l.mu.Lock()
	env := l.env
	l.mu.Unlock()
	if _, onNodes := env.(NodeFaults); env == nil || onNodes {
		return nil, errors.New("only a lab on this host's namespaces can count the flows")
	}
	faults, err := l.Variant.Faults()
	if err != nil {
		return nil, err
	}
	reg, err := injector.NewRegistry(injector.CongestionKind())
	if err != nil {
		return nil, err
	}
	var out []float64
	for i, f := range faults {
		if f.Kind != "congestion" {
			continue
		}
		p, err := reg.Parse(f.Kind, f.Params)
		if err != nil {
			return nil, err
		}
		proto, ports := p.(*injector.Congestion).Flows()
		bps, err := injector.Delivered(ctx, env.Target(f.Node), fmt.Sprintf("grade%d", i), proto, ports, 3*time.Second)
		if err != nil {
			return nil, err
		}
		for _, b := range bps {
			out = append(out, b/1e6)
		}
	}
	return out, nil
}
