// Package walkthrough runs a lab end to end as a learner would: it starts the lab
// through the same lifecycle as the server (labs/session), types the scenario's
// reference solution into the learner's terminals, answers with the scenario's own
// diagnosis citing the commands the solution marks, and stops the lab. It is how
// `commlab gpu check` proves GPU-node labs on a real GPU node.
package walkthrough

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/commlab/commlab/grader"
	"github.com/commlab/commlab/labs/cgroup"
	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/scenarios"
)

// Report is what one walk-through found.
type Report struct {
	Scenario string
	// Ready is how long the lab took from start to open terminals; Took the whole walk.
	Ready, Took time.Duration
	// Baseline is the workload's healthy figure (0 if the lab measures none);
	// Workload its last figure measured with the fault in place, before grading.
	Baseline, Workload float64
	Result             grader.Result
	// Steps are the commands typed, with what each printed.
	Steps []Step
}

// Step is one command of the solution as the terminal recorded it.
type Step struct {
	Node, Line, Output string
	Exit               int
}

// Timeouts bound each phase; the zero value uses the defaults.
type Timeouts struct {
	Start   time.Duration // until the lab is ready (default 5 minutes)
	Command time.Duration // for each typed command (default 3 minutes)
}

// Run walks through variant in a lab started with cfg, and always stops the lab
// before it returns. The error says which phase failed; a wrong grade is not an
// error (see Report.Result.Passed).
func Run(ctx context.Context, cfg session.Config, v *scenarios.Variant, to Timeouts) (rep Report, err error) {
	if to.Start == 0 {
		to.Start = 5 * time.Minute
	}
	if to.Command == 0 {
		to.Command = 3 * time.Minute
	}
	sc := v.Scenario
	rep.Scenario = sc.ID
	if len(sc.Solution) == 0 {
		return rep, fmt.Errorf("scenario %s has no solution to walk through", sc.ID)
	}
	began := time.Now()
	l := session.Start(ctx, cfg, 0, v)
	defer func() {
		l.Stop()
		l.Wait()
		rep.Took = time.Since(began)
	}()
	if err := waitReady(ctx, l, to.Start); err != nil {
		return rep, err
	}
	rep.Ready, rep.Baseline = time.Since(began), l.Baseline()

	var cited []grader.EvidenceRef
	for _, st := range sc.Solution {
		if !holds(st.When) {
			continue
		}
		cmd, err := typeLine(ctx, l, st.Node, st.Run, to.Command)
		if err != nil {
			return rep, err
		}
		rep.Steps = append(rep.Steps, Step{Node: st.Node, Line: st.Run, Output: cmd.Output, Exit: cmd.Exit})
		if st.Cite {
			cited = append(cited, grader.EvidenceRef{Terminal: st.Node, Seq: cmd.Seq})
		}
	}
	if sc.Workload != nil {
		if rep.Workload, err = faultedFigure(ctx, l, to.Command); err != nil {
			return rep, err
		}
	}
	res, err := l.Grade(ctx, grader.Diagnosis{Class: sc.Diagnosis.Class, Location: v.Location(), Evidence: cited})
	if err != nil {
		return rep, fmt.Errorf("grade: %w", err)
	}
	rep.Result = res
	return rep, nil
}

// holds reports whether a solution step's condition holds on this host.
func holds(when string) bool {
	switch when {
	case "cgroup1":
		return !cgroup.Unified()
	case "cgroup2":
		return cgroup.Unified()
	}
	return true
}

// faultedFigure is the workload's most recent figure on the lab's chart measured
// after the fault appeared, waiting up to limit for the first such run (the chart's
// healthy baseline comes before the fault and is not one).
func faultedFigure(ctx context.Context, l *session.Lab, limit time.Duration) (float64, error) {
	list, next, cancel := l.Samples().Subscribe()
	defer cancel()
	bw, seen := figureAfterFault(list, false)
	if seen && bw >= 0 {
		return bw, nil
	}
	timeout := time.After(limit)
	for {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-timeout:
			return 0, fmt.Errorf("the workload measured nothing with the fault in place within %s", limit)
		case x := <-next:
			if bw, seen = figureAfterFault([]session.Sample{x}, seen); seen && bw >= 0 {
				return bw, nil
			}
		}
	}
}

// figureAfterFault scans samples in order; faulted says the fault mark was already
// seen. It returns the last figure after the mark (-1 if none) and whether the mark
// has been seen.
func figureAfterFault(samples []session.Sample, faulted bool) (float64, bool) {
	bw := -1.0
	for _, x := range samples {
		switch {
		case x.Type == "event" && x.Label == session.FaultEvent:
			faulted, bw = true, -1
		case x.Type == "sample" && faulted:
			bw = x.BusBW
		}
	}
	return bw, faulted
}

func waitReady(ctx context.Context, l *session.Lab, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		st := l.Status()
		switch {
		case st.State == session.Ready:
			return nil
		case st.State != session.Starting:
			return fmt.Errorf("the lab did not start (%s): %s", st.State, st.Failure)
		case time.Now().After(deadline):
			return fmt.Errorf("the lab was not ready after %s (at: %s)", limit, st.Step)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// command is a finished command as a terminal recorded it.
type command struct {
	Seq, Exit int
	Output    string
}

// typeLine types line into node's terminal and waits until the shell reports it done.
func typeLine(ctx context.Context, l *session.Lab, node, line string, limit time.Duration) (command, error) {
	term, ok := l.Terminal(node)
	if !ok {
		return command{}, fmt.Errorf("the lab has no terminal on %s", node)
	}
	before, err := term.Commands()
	if err != nil {
		return command{}, err
	}
	if _, err := term.Write([]byte(line + "\n")); err != nil {
		return command{}, fmt.Errorf("type on %s: %w", node, err)
	}
	deadline := time.Now().Add(limit)
	for {
		cmds, err := term.Commands()
		if err != nil {
			return command{}, err
		}
		if n := len(cmds); n > len(before) && cmds[n-1].Exit >= 0 {
			c := cmds[n-1]
			return command{Seq: c.Seq, Exit: c.Exit, Output: c.Output}, nil
		}
		if time.Now().After(deadline) {
			return command{}, fmt.Errorf("%s: %q did not finish within %s", node, line, limit)
		}
		select {
		case <-ctx.Done():
			return command{}, errors.Join(fmt.Errorf("%s: %q interrupted", node, line), ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
