package session

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/commlab/commlab/grader"
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

// Grade scores a diagnosis. When the lab has a remediation check, the workload is
// measured again first (the learner's fix must already be in place). Grading ends the
// lab: the faults are reverted and the environment goes down.
func (l *Lab) Grade(ctx context.Context, d grader.Diagnosis) (grader.Result, error) {
	l.mu.Lock()
	if l.state != Ready {
		st := l.state
		l.mu.Unlock()
		return grader.Result{}, fmt.Errorf("%w (it is %s)", ErrNotReady, st)
	}
	l.state = Grading
	l.mu.Unlock()

	ts, err := l.Transcripts()
	if err != nil {
		return grader.Result{}, err
	}
	in := grader.Input{Variant: l.Variant, Diagnosis: d, Transcripts: ts, HintsUsed: l.HintsUsed()}
	if r := l.Variant.Scenario.Remediation; r != nil && l.baseline > 0 {
		// One run can be unlucky on a busy host: a second chance before saying "not fixed".
		var after float64
		for try := 0; try < 2 && after < r.MinRatio*l.baseline; try++ {
			bw, err := l.measure(l.ctx)
			if err != nil && !errors.Is(err, ErrWorkloadFailed) {
				return grader.Result{}, fmt.Errorf("re-measure after the fix: %w", err)
			}
			after = max(after, bw)
		}
		in.Remediation = &grader.Measurement{Baseline: l.baseline, Faulted: l.faulted, After: after}
	}
	res, err := grader.Grade(in)
	if err != nil {
		return grader.Result{}, err
	}
	l.mu.Lock()
	l.result, l.state = &res, Done
	l.mu.Unlock()
	l.cancel() // teardown: revert and down
	return res, nil
}
