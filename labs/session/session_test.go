package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commlab/commlab/grader"
	"github.com/commlab/commlab/injector"
	"github.com/commlab/commlab/scenarios"
)

// The fakes stand for what lies outside this package: the sandbox (namespaces, shells,
// the workload) and the injector. Each failure point of a lab's life can be set.

const testScenario = `id: t-two-faults
chapter: ch08
title: t
environment: {kind: gpu}
workload: {gpu: [nccl-test]}
params:
  rate: {choose: ["80"]}
faults:
  - {kind: nic-rate, node: node2, params: {nic: rdma0, rate: "${rate}mbit"}}
  - {kind: loss, node: node1, params: {nic: rdma0, percent: "5%"}}
task: t
diagnosis: {class: nic-rate-limited, location: {node: node2, nic: rdma0}}
evidence:
  - {id: tbf, node: node2, command: '^tc\b', output: 'tbf'}
remediation: {measure: workload, min_ratio: 0.8}
hints:
  - {text: h, cost: 0.1}
  - {text: "h2 ${rate}", cost: 0.2}
debrief: d
`

func testVariant(t *testing.T) *scenarios.Variant {
	t.Helper()
	s, probs := scenarios.Parse("t.yaml", []byte(testScenario), scenarios.Options{})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	return s.Draw(1)
}

// fakeHost records what the lab did to it, in order.
type fakeHost struct {
	mu      sync.Mutex
	log     []string
	downs   int
	upErr   error
	applyAt int // the nth Apply (1-based) fails; 0: none
	applied int
	// workload answers the nth run; a nil func measures 1 GB/s.
	workload    func(ctx context.Context, n int) (float64, error)
	runs        int
	unsupported string
	// login makes every fault kind change the login environment; the host then
	// also notes each shell opened.
	login bool
	// envRenewErr fails the environment's renew.
	envRenewErr error
	// fixed is a kind whose faults cannot be renewed (their helper stops at the
	// deadline it was started with, as nic-flap's and congestion's do).
	fixed string
	// kinds and ttls are each applied fault's, by id.
	kinds map[string]string
	ttls  map[string]time.Duration
	// held counts the environment's Prioritize calls not yet restored; prioritized
	// says, run by run, whether one was held; prioErr fails Prioritize.
	held        int
	prioritized []bool
	prioErr     error
}

func (h *fakeHost) Renew(ctx context.Context, id string, ttl time.Duration) error {
	h.mu.Lock()
	fixed := h.fixed != "" && h.kinds[id] == h.fixed
	h.mu.Unlock()
	if fixed {
		return fmt.Errorf("renew %s: %s: %w", id, h.fixed, injector.ErrFixedDeadline)
	}
	h.note(fmt.Sprintf("renew %s %s", id, ttl.Round(time.Hour)))
	return nil
}

// ttl is how long fault id was applied for, to the hour.
func (h *fakeHost) ttl(id string) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ttls[id].Round(time.Hour)
}

func (h *fakeHost) note(s string) {
	h.mu.Lock()
	h.log = append(h.log, s)
	h.mu.Unlock()
}

func (h *fakeHost) events() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.log)
}

func (h *fakeHost) Up(ctx context.Context, env scenarios.Environment, ttl time.Duration, progress func(Progress)) (Env, error) {
	h.note("up")
	if h.upErr != nil {
		return nil, h.upErr
	}
	// A netns sandbox goes down by itself when the context it came up with ends; a
	// lab must not end that context before its teardown has reverted the faults.
	context.AfterFunc(ctx, func() { h.note("environment ended with its context") })
	return fakeEnv{h}, nil
}

func (h *fakeHost) Check(scenarios.Environment) error { return nil }

func (h *fakeHost) Apply(ctx context.Context, t injector.Target, kind string, params map[string]string, ttl time.Duration) (string, string, error) {
	h.mu.Lock()
	h.applied++
	n := h.applied
	h.mu.Unlock()
	if n == h.applyAt {
		return "", "", errors.New("apply failed")
	}
	id := fmt.Sprintf("f%d", n)
	h.mu.Lock()
	if h.kinds == nil {
		h.kinds, h.ttls = map[string]string{}, map[string]time.Duration{}
	}
	h.kinds[id], h.ttls[id] = kind, ttl
	h.mu.Unlock()
	h.note("apply " + id)
	return id, "tc qdisc add dev rdma0 root tbf", nil
}

func (h *fakeHost) Revert(ctx context.Context, id string) error { h.note("revert " + id); return nil }

func (h *fakeHost) ChangesLogin(kind string) bool { return h.login }

func (h *fakeHost) Supports(ctx context.Context, kind string) error {
	if kind == h.unsupported {
		return fmt.Errorf("%s: this kernel has no sch_netem", kind)
	}
	return nil
}

type fakeEnv struct{ h *fakeHost }

func (e fakeEnv) ID() string                         { return "fake1" }
func (e fakeEnv) Nodes() []string                    { return []string{"node1", "node2"} }
func (e fakeEnv) Target(node string) injector.Target { return injector.Target{} }
func (e fakeEnv) Shell(ctx context.Context, node, rc string) (PTY, error) {
	if e.h.login {
		e.h.note("shell " + node)
	}
	r, w := io.Pipe()
	return &fakePTY{r: r, w: w}, nil
}

func (e fakeEnv) Workload(ctx context.Context, w *scenarios.Workload, env []string, out io.Writer) (float64, error) {
	e.h.mu.Lock()
	e.h.runs++
	n, f := e.h.runs, e.h.workload
	e.h.prioritized = append(e.h.prioritized, e.h.held > 0)
	e.h.mu.Unlock()
	if f == nil {
		return 1, nil
	}
	return f(ctx, n)
}

func (e fakeEnv) Prioritize() (func() error, error) {
	e.h.mu.Lock()
	defer e.h.mu.Unlock()
	if e.h.prioErr != nil {
		return nil, e.h.prioErr
	}
	e.h.held++
	return sync.OnceValue(func() error {
		e.h.mu.Lock()
		defer e.h.mu.Unlock()
		e.h.held--
		return nil
	}), nil
}

func (e fakeEnv) Renew(ctx context.Context, id string, ttl time.Duration) error {
	e.h.note(fmt.Sprintf("renew %s %s", id, ttl.Round(time.Hour)))
	return e.h.envRenewErr
}

func (e fakeEnv) Down(ctx context.Context) error {
	e.h.mu.Lock()
	e.h.downs++
	e.h.mu.Unlock()
	e.h.note("down")
	return nil
}

// fakePTY echoes what is typed, as a shell's line discipline would.
type fakePTY struct {
	r *io.PipeReader
	w *io.PipeWriter
}

func (p *fakePTY) Read(b []byte) (int, error)     { return p.r.Read(b) }
func (p *fakePTY) Write(b []byte) (int, error)    { return p.w.Write(b) }
func (p *fakePTY) Resize(rows, cols uint16) error { return nil }
func (p *fakePTY) Close() error                   { p.w.Close(); return p.r.Close() }

// healthyThenFaulted: the baseline measures 1, the self-test 0.1, re-measures 1 (fixed).
func healthyThenFaulted(ctx context.Context, n int) (float64, error) {
	if n == 2 {
		return 0.1, nil
	}
	return 1, nil
}

// blockUntil makes run n block until ctx ends.
func blockOn(n int, next func(context.Context, int) (float64, error)) func(context.Context, int) (float64, error) {
	return func(ctx context.Context, m int) (float64, error) {
		if m == n {
			<-ctx.Done()
			return 0, ctx.Err()
		}
		return next(ctx, m)
	}
}

var quiet = slog.New(slog.DiscardHandler)

func startLab(t *testing.T, h *fakeHost, ttl time.Duration) *Lab {
	t.Helper()
	l := Start(context.Background(), Config{Provider: h, Faults: h, DataDir: t.TempDir(), TTL: ttl, NoStream: true, Log: quiet}, 1, testVariant(t))
	// The teardown writes into the data directory: it ends before TempDir removes it.
	t.Cleanup(func() { l.Stop(); l.Wait() })
	return l
}

func waitFor(t *testing.T, l *Lab, ok func(Status) bool) Status {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if st := l.Status(); ok(st) {
			return st
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("lab stuck at %+v", l.Status())
	return Status{}
}

func ended(t *testing.T, l *Lab) {
	t.Helper()
	select {
	case <-l.Ended():
	case <-time.After(10 * time.Second):
		t.Fatalf("lab did not end: %+v", l.Status())
	}
}

// TestLifecycle drives a lab into every failure point and checks how it ends: which
// state, the faults reverted in reverse order, the environment down exactly once.
func TestLifecycle(t *testing.T) {
	tests := []struct {
		name    string
		host    *fakeHost
		ttl     time.Duration
		act     func(t *testing.T, l *Lab)
		want    State
		failure string
		events  []string
	}{
		{name: "up fails", host: &fakeHost{upErr: errors.New("no slot")}, want: Failed, failure: "no slot",
			events: []string{"up"}},
		{name: "baseline fails", host: &fakeHost{workload: func(context.Context, int) (float64, error) { return 0, errors.New("rank 1 crashed") }},
			want: Failed, failure: "baseline", events: []string{"up", "down"}},
		{name: "second apply fails, first reverted", host: &fakeHost{applyAt: 2, workload: healthyThenFaulted},
			want: Failed, failure: "inject loss", events: []string{"up", "apply f1", "revert f1", "down"}},
		{name: "ineffective self-test", host: &fakeHost{},
			want: Failed, failure: "did not slow", events: []string{"up", "apply f1", "apply f2", "revert f2", "revert f1", "down"}},
		{name: "cancel during start", host: &fakeHost{workload: blockOn(1, healthyThenFaulted)},
			act: func(t *testing.T, l *Lab) {
				waitFor(t, l, func(s Status) bool { return s.Step == StepBaseline })
				l.Stop()
			}, want: Stopped, events: []string{"up", "down"}},
		{name: "login faults: shells open after them", host: &fakeHost{workload: healthyThenFaulted, login: true}, ttl: 300 * time.Millisecond,
			want: Expired, events: []string{"up", "apply f1", "apply f2", "shell node1", "shell node2", "revert f2", "revert f1", "down"}},
		{name: "TTL", host: &fakeHost{workload: healthyThenFaulted}, ttl: 300 * time.Millisecond,
			want: Expired, events: []string{"up", "apply f1", "apply f2", "revert f2", "revert f1", "down"}},
		{name: "submitted", host: &fakeHost{workload: healthyThenFaulted},
			act: func(t *testing.T, l *Lab) {
				d := grader.Diagnosis{Class: "nic-rate-limited", Location: map[string]string{"node": "node2", "nic": "rdma0"}}
				if _, err := l.Check(context.Background(), d); err != nil {
					t.Fatal(err)
				}
				if st := l.Status(); st.State != Ready || st.ChecksLeft != MaxChecks-1 || l.Result() != nil {
					t.Fatalf("after a check: %+v, result %v", st, l.Result())
				}
				res, err := l.Grade(context.Background(), d)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(fmt.Sprint(res.Criteria), "grade.checks") {
					t.Errorf("the check is not costed: %+v", res.Criteria)
				}
			}, want: Done, events: []string{"up", "apply f1", "apply f2", "revert f2", "revert f1", "down"}},
		{name: "extra fault, reverted first", host: &fakeHost{workload: healthyThenFaulted},
			act: func(t *testing.T, l *Lab) {
				waitFor(t, l, func(s Status) bool { return s.Confirmed })
				if _, err := l.Inject(context.Background(), scenarios.Fault{Kind: "loss", Node: "node9"}); err == nil {
					t.Error("a fault on a node the lab lacks went in")
				}
				cmd, err := l.Inject(context.Background(), scenarios.Fault{Kind: "loss", Node: "node1", Params: map[string]string{"nic": "rdma0"}})
				if err != nil || !strings.HasPrefix(cmd, "node1: ") || len(l.Injected()) != 3 {
					t.Fatalf("Inject = %q, %v; injected %q", cmd, err, l.Injected())
				}
				l.Stop()
				ended(t, l)
				if _, err := l.Inject(context.Background(), scenarios.Fault{Kind: "loss", Node: "node1"}); !errors.Is(err, ErrNotRunning) {
					t.Errorf("inject into an ended lab: %v", err)
				}
			}, want: Stopped, events: []string{"up", "apply f1", "apply f2", "apply f3", "revert f3", "revert f2", "revert f1", "down"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ttl := tt.ttl
			if ttl == 0 {
				ttl = time.Minute
			}
			h := tt.host
			l := startLab(t, h, ttl)
			if tt.act != nil {
				tt.act(t, l)
			}
			ended(t, l)
			st := l.Status()
			if st.State != tt.want || !strings.Contains(st.Failure, tt.failure) {
				t.Errorf("state %s (%q), want %s (%q)", st.State, st.Failure, tt.want, tt.failure)
			}
			if got := h.events(); !slices.Equal(got, tt.events) {
				t.Errorf("host saw %q, want %q", got, tt.events)
			}
		})
	}
}

// A failed or timed-out grading leaves the lab usable: Ready, and gradable again.
func TestGradeFailureKeepsLab(t *testing.T) {
	var fail sync.Mutex
	failing := true
	h := &fakeHost{workload: func(ctx context.Context, n int) (float64, error) {
		switch {
		case n == 2:
			return 0.1, nil
		case n == 3:
			<-ctx.Done() // the re-measure hangs until the grading's ctx gives up
			return 0, ctx.Err()
		}
		fail.Lock()
		defer fail.Unlock()
		if failing && n > 3 {
			return 0, errors.New("exec: commlab: not found")
		}
		return 1, nil
	}}
	l := startLab(t, h, time.Minute)
	defer l.Stop()
	waitFor(t, l, func(s Status) bool { return s.Confirmed })
	d := grader.Diagnosis{Class: "nic-rate-limited"}

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := l.Grade(ctx, d); err == nil {
		t.Fatal("a grading past its deadline succeeded")
	}
	if st := l.Status(); st.State != Ready {
		t.Fatalf("after a timed-out grading the lab is %s", st.State)
	}
	if _, err := l.Grade(context.Background(), d); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("a failed re-measure graded: %v", err)
	}
	if st := l.Status(); st.State != Ready {
		t.Fatalf("after a failed grading the lab is %s", st.State)
	}
	fail.Lock()
	failing = false
	fail.Unlock()
	if _, err := l.Grade(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	ended(t, l)
	if l.Status().State != Done {
		t.Errorf("state %s after grading", l.Status().State)
	}
}

// Checks are limited; a grading waits for the self-test instead of refusing.
func TestChecksAndConfirmation(t *testing.T) {
	release := make(chan struct{})
	h := &fakeHost{workload: func(ctx context.Context, n int) (float64, error) {
		if n == 2 {
			<-release // the self-test is still running
			return 0.1, nil
		}
		return 1, nil
	}}
	l := startLab(t, h, time.Minute)
	defer l.Stop()
	st := waitFor(t, l, func(s Status) bool { return s.State == Ready })
	if st.Confirmed || len(st.Nodes) != 2 {
		t.Fatalf("ready before the self-test: %+v", st)
	}
	if _, ok := l.Terminal("node1"); !ok {
		t.Fatal("no terminal while the self-test runs")
	}
	d := grader.Diagnosis{Class: "link-loss"}
	done := make(chan error)
	go func() { _, err := l.Check(context.Background(), d); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("checked before the self-test ended: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i := 1; i < MaxChecks; i++ {
		if _, err := l.Check(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Check(context.Background(), d); !errors.Is(err, ErrNoChecksLeft) {
		t.Fatalf("check %d: %v", MaxChecks+1, err)
	}
	if l.Revealed() {
		t.Error("checks revealed the debrief")
	}
	if res, _ := l.Grade(context.Background(), d); res.Passed || l.Revealed() {
		t.Errorf("a wrong final answer revealed the debrief (passed %v)", res.Passed)
	}
	l.GiveUp()
	if !l.Revealed() {
		t.Error("giving up did not reveal the debrief")
	}
}

// TestGivenHints: a hint the instructor gave is open and costs nothing at grading,
// even one the learner had opened (and would have paid for) before.
func TestGivenHints(t *testing.T) {
	tests := []struct {
		name             string
		opened, given    []int
		wantUsed, wantOp []int
		wantCost         float64
	}{
		{"learner only", []int{0}, nil, []int{0}, []int{0}, 0.1},
		{"given only", nil, []int{1}, nil, []int{1}, 0},
		{"opened then given", []int{0, 1}, []int{0}, []int{1}, []int{0, 1}, 0.2},
		{"both given", []int{0}, []int{0, 1}, nil, []int{0, 1}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := startLab(t, &fakeHost{workload: healthyThenFaulted}, time.Minute)
			defer l.Stop()
			waitFor(t, l, func(s Status) bool { return s.Confirmed })
			for _, i := range tc.opened {
				if _, err := l.Hint(i); err != nil {
					t.Fatal(err)
				}
			}
			for _, i := range tc.given {
				if err := l.GiveHint(i); err != nil {
					t.Fatal(err)
				}
			}
			if got := l.HintsUsed(); !slices.Equal(got, tc.wantUsed) {
				t.Errorf("used %v, want %v", got, tc.wantUsed)
			}
			if got := l.HintsOpen(); !slices.Equal(got, tc.wantOp) {
				t.Errorf("open %v, want %v", got, tc.wantOp)
			}
			res, err := l.Grade(context.Background(), grader.Diagnosis{Class: "nic-rate-limited"})
			if err != nil {
				t.Fatal(err)
			}
			cost := 0.0
			for _, c := range res.Criteria {
				if c.Name == "hints" {
					cost = -c.Earned
				}
			}
			if diff := cost - tc.wantCost; diff > 1e-9 || diff < -1e-9 {
				t.Errorf("hints cost %.2f, want %.2f", cost, tc.wantCost)
			}
		})
	}
	l := startLab(t, &fakeHost{workload: healthyThenFaulted}, time.Minute)
	defer l.Stop()
	if err := l.GiveHint(2); err == nil || err.Error() != "no hint 3" {
		t.Errorf("GiveHint past the last: %v", err)
	}
}

// TestExtend: an extension renews what ends the lab from outside (its faults, then
// its environment) before the lab's own end moves; a fault whose helper cannot be
// renewed is applied again for the new end. When a step fails, the lab keeps its
// old end, and its teardown there reverts every fault; a fault that cannot be
// applied again fails the lab, which is then not scored.
func TestExtend(t *testing.T) {
	tests := []struct {
		name    string
		host    *fakeHost
		wantErr error
		// wantLog is the host's log from the extension on: all of it when the
		// extension fails, its start when the test stops the lab after.
		wantLog []string
		// wantTTL are the faults applied for the new end, by id.
		wantTTL   map[string]time.Duration
		wantState State
	}{
		{"renewed", &fakeHost{}, nil, []string{"renew f1 1h0m0s", "renew f2 1h0m0s", "renew fake1 1h0m0s"}, nil, Stopped},
		{"environment refuses", &fakeHost{envRenewErr: errors.New("disk full")}, ErrCannotExtend,
			[]string{"renew f1 1h0m0s", "renew f2 1h0m0s", "renew fake1 1h0m0s", "revert f2", "revert f1", "down"}, nil, Expired},
		{"helper with its own deadline applied again", &fakeHost{fixed: "loss"}, nil,
			[]string{"renew f1 1h0m0s", "revert f2", "apply f3", "renew fake1 1h0m0s"}, map[string]time.Duration{"f3": time.Hour}, Stopped},
		{"helper cannot start again", &fakeHost{fixed: "loss", applyAt: 3}, ErrCannotExtend,
			[]string{"renew f1 1h0m0s", "revert f2", "revert f1", "down"}, nil, Failed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.host
			h.workload = healthyThenFaulted
			l := startLab(t, h, 2*time.Second)
			defer l.Stop()
			old := waitFor(t, l, func(s Status) bool { return s.Confirmed }).Expires
			from := len(h.events())
			end, err := l.Extend(context.Background(), time.Hour)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("extend: %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr == nil {
				if got := l.Status().Expires; !got.Equal(end) || end.Sub(old) != time.Hour {
					t.Errorf("expires %s (returned %s), want %s", got, end, old.Add(time.Hour))
				}
				time.Sleep(time.Until(old) + 300*time.Millisecond)
				if !l.Running() {
					t.Fatalf("the lab ended at its old end: %+v", l.Status())
				}
				l.Stop()
			} else if got := l.Status().Expires; !got.Equal(old) {
				t.Errorf("a failed extension moved the end to %s", got)
			}
			ended(t, l)
			if st := l.Status(); st.State != tc.wantState || (st.State == Failed && !strings.Contains(st.Failure, "not scored")) {
				t.Errorf("ended %s (%q), want %s", st.State, st.Failure, tc.wantState)
			}
			got := h.events()[from:]
			if tc.wantErr == nil && len(got) > len(tc.wantLog) {
				got = got[:len(tc.wantLog)]
			}
			if !slices.Equal(got, tc.wantLog) {
				t.Errorf("host log %q, want %q", got, tc.wantLog)
			}
			for id, want := range tc.wantTTL {
				if got := h.ttl(id); got != want {
					t.Errorf("%s applied for %s, want %s", id, got, want)
				}
			}
		})
	}
	l := startLab(t, &fakeHost{workload: healthyThenFaulted}, time.Minute)
	waitFor(t, l, func(s Status) bool { return s.Confirmed })
	if _, err := l.Extend(context.Background(), 5*time.Hour); err == nil {
		t.Error("extended by more than MaxExtend")
	}
	l.Stop()
	ended(t, l)
	if _, err := l.Extend(context.Background(), time.Hour); !errors.Is(err, ErrNotRunning) {
		t.Errorf("extend a stopped lab: %v", err)
	}
}

// TestExtendWhileStarting: time given to a lab still starting is owed and given once
// it is Ready, its environment up and its faults in: the faults applied before the
// extension and the environment are renewed then (those with a helper of their own
// applied again), and the lab's end moves by all the time given. An extension that
// cannot be given then leaves the lab its old end.
func TestExtendWhileStarting(t *testing.T) {
	tests := []struct {
		name    string
		host    *fakeHost
		extends []time.Duration
		// wantLog is what the host saw after the faults went in.
		wantLog []string
		wantTTL map[string]time.Duration
		// wantMoved is how far the lab's end moved once it was Ready.
		wantMoved time.Duration
	}{
		{"once", &fakeHost{}, []time.Duration{time.Hour},
			[]string{"renew f1 1h0m0s", "renew f2 1h0m0s", "renew fake1 1h0m0s"}, nil, time.Hour},
		{"twice", &fakeHost{}, []time.Duration{time.Hour, 2 * time.Hour},
			[]string{"renew f1 3h0m0s", "renew f2 3h0m0s", "renew fake1 3h0m0s"}, nil, 3 * time.Hour},
		{"helper with its own deadline", &fakeHost{fixed: "nic-rate"}, []time.Duration{time.Hour},
			[]string{"revert f1", "apply f3", "renew f2 1h0m0s", "renew fake1 1h0m0s"}, map[string]time.Duration{"f3": time.Hour}, time.Hour},
		{"environment refuses then", &fakeHost{envRenewErr: errors.New("disk full")}, []time.Duration{time.Hour},
			[]string{"renew f1 1h0m0s", "renew f2 1h0m0s", "renew fake1 1h0m0s"}, nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.host
			baseline := make(chan struct{})
			h.workload = func(ctx context.Context, n int) (float64, error) {
				if n == 1 { // the lab stays Starting until its baseline is measured
					select {
					case <-baseline:
					case <-ctx.Done():
						return 0, ctx.Err()
					}
				}
				return healthyThenFaulted(ctx, n)
			}
			l := startLab(t, h, time.Minute)
			defer l.Stop()
			old := waitFor(t, l, func(s Status) bool { return s.State == Starting && s.Step == StepBaseline }).Expires
			var given time.Duration
			for _, d := range tc.extends {
				given += d
				end, err := l.Extend(context.Background(), d)
				if err != nil || !end.Equal(old.Add(given)) {
					t.Fatalf("extend by %s while starting: %s, %v; want %s", d, end, err, old.Add(given))
				}
			}
			if got := l.Status().Expires; !got.Equal(old) {
				t.Errorf("the end moved to %s before the lab was Ready", got)
			}
			close(baseline)
			st := waitFor(t, l, func(s Status) bool { return s.Confirmed })
			if got := st.Expires.Sub(old); got != tc.wantMoved {
				t.Errorf("once Ready, the end moved by %s, want %s", got, tc.wantMoved)
			}
			log := h.events()
			faultsIn := slices.Index(log, "apply f2") + 1
			if got := log[faultsIn:]; !slices.Equal(got, tc.wantLog) {
				t.Errorf("host log after the faults went in %q, want %q", got, tc.wantLog)
			}
			for id, want := range tc.wantTTL {
				if got := h.ttl(id); got != want {
					t.Errorf("%s applied for %s, want %s", id, got, want)
				}
			}
		})
	}
}

// The chart marks the moment of the fault, never its kind or parameters.
func TestChartNamesNoFault(t *testing.T) {
	l := startLab(t, &fakeHost{workload: healthyThenFaulted}, time.Minute)
	defer l.Stop()
	waitFor(t, l, func(s Status) bool { return s.Confirmed })
	past, _, stop := l.Samples().Subscribe()
	stop()
	var kinds []string
	for _, x := range past {
		kinds = append(kinds, x.Type+":"+x.Label)
	}
	if want := []string{"sample:", "event:" + FaultEvent, "sample:"}; !slices.Equal(kinds, want) {
		t.Errorf("chart got %q, want %q", kinds, want)
	}
}

// The live chart gets a sample from each background run after the fault: the
// runs the stream makes are samples, not runs a grading cut short.
func TestChartStreams(t *testing.T) {
	h := &fakeHost{workload: func(ctx context.Context, n int) (float64, error) {
		if n == 1 {
			return 1, nil
		}
		if n == 2 {
			return 0.2, nil // the self-test with the fault
		}
		return 0.5, nil // the stream's runs
	}}
	l := Start(context.Background(), Config{Provider: h, Faults: h, DataDir: t.TempDir(), TTL: time.Minute, Log: quiet}, 1, testVariant(t))
	t.Cleanup(func() { l.Stop(); l.Wait() })
	_, next, stop := l.Samples().Subscribe()
	defer stop()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case x := <-next:
			if x.Type == "sample" && x.BusBW == 0.5 {
				return // a streamed run (the third or later) reached the chart
			}
		case <-timeout:
			t.Fatalf("no streamed sample reached the chart in 20 s (%d workload runs)", h.runCount())
		}
	}
}

func TestManager(t *testing.T) {
	t.Run("a host lacking a fault's feature is refused before any sandbox", func(t *testing.T) {
		h := &fakeHost{unsupported: "loss"}
		m := NewManager(context.Background(), Config{Provider: h, Faults: h, DataDir: t.TempDir(), NoStream: true, Log: quiet})
		if _, err := m.Start(1, testVariant(t)); err == nil || !strings.Contains(err.Error(), "sch_netem") {
			t.Fatalf("started: %v", err)
		}
		if ev := h.events(); len(ev) > 0 {
			t.Errorf("the host was touched: %q", ev)
		}
	})
	t.Run("one lab per learner, ended labs forgotten", func(t *testing.T) {
		h := &fakeHost{workload: healthyThenFaulted}
		m := NewManager(context.Background(), Config{Provider: h, Faults: h, DataDir: t.TempDir(), NoStream: true, Log: quiet})
		m.Retain = 50 * time.Millisecond
		l, err := m.Start(1, testVariant(t))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Start(1, testVariant(t)); !errors.Is(err, ErrBusy) {
			t.Fatalf("second lab: %v", err)
		}
		if _, err := m.Get(2, l.ID); !errors.Is(err, ErrNoLab) {
			t.Fatalf("another learner got the lab: %v", err)
		}
		l.Stop()
		ended(t, l)
		if _, err := m.Get(1, l.ID); err != nil {
			t.Fatalf("an ended lab is gone at once: %v", err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for len(m.All()) > 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := len(m.All()); n != 0 {
			t.Fatalf("%d ended labs still kept", n)
		}
		if _, ok := m.Current(1); ok {
			t.Error("Current returns a forgotten lab")
		}
	})
}

// A re-measure that hangs (the fault still blocks the workload) is cut once it can no
// longer pass and counts as not fixed: grading never waits for the workload's own
// timeout.
func TestRemeasureBounded(t *testing.T) {
	h := &fakeHost{workload: func(ctx context.Context, n int) (float64, error) {
		switch {
		case n == 2:
			return 0, ErrWorkloadFailed
		case n > 2:
			<-ctx.Done()
			return 0, ctx.Err()
		}
		return 1, nil
	}}
	l := startLab(t, h, time.Minute)
	waitFor(t, l, func(s Status) bool { return s.Confirmed })
	done := make(chan grader.Result)
	go func() {
		res, err := l.Grade(context.Background(), grader.Diagnosis{Class: "nic-rate-limited"})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	select {
	case res := <-done:
		for _, c := range res.Criteria {
			if c.Name == "remediation" && (c.Earned != 0 || c.Key != "grade.fix.short") {
				t.Errorf("a hanging re-measure: %+v", c)
			}
		}
	case <-time.After(time.Minute):
		t.Fatal("grading waits for a hanging workload")
	}
	ended(t, l)
}

// TestCheckWithin: a check's re-measure is cut where the caller says (NoFixAfter is
// the healthy run's time over the ratio plus 2 s), or at the grading's margin when it
// says nothing; a cut run earns no remediation credit, a fix that finishes earns it,
// and either way the check is counted.
func TestCheckWithin(t *testing.T) {
	for _, tt := range []struct {
		name      string
		cut       bool          // give NoFixAfter, not 0
		run       time.Duration // how long the re-measure's run takes
		credit    bool
		wantGiven func(l *Lab) time.Duration
	}{
		{"cut at NoFixAfter", true, time.Hour, false, (*Lab).NoFixAfter},
		{"a fix within it", true, 0, true, (*Lab).NoFixAfter},
		{"no cut given: the grading's margin", false, 0, true, func(l *Lab) time.Duration { return l.cutAfter(0.8) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var given time.Duration
			h := &fakeHost{workload: func(ctx context.Context, n int) (float64, error) {
				if n < 3 {
					return healthyThenFaulted(ctx, n)
				}
				if d, ok := ctx.Deadline(); ok {
					given = time.Until(d)
				}
				select {
				case <-ctx.Done():
					return 0, ctx.Err()
				case <-time.After(tt.run):
					return 1, nil
				}
			}}
			l := startLab(t, h, time.Hour)
			waitFor(t, l, func(s Status) bool { return s.Confirmed })
			if l.NoFixAfter() < 2*time.Second || l.NoFixAfter() >= l.cutAfter(0.8) {
				t.Fatalf("NoFixAfter %s, want 2 s and more, under the grading's %s", l.NoFixAfter(), l.cutAfter(0.8))
			}
			var cut time.Duration
			if tt.cut {
				cut = l.NoFixAfter()
			}
			res, err := l.CheckWithin(context.Background(), grader.Diagnosis{Class: "nic-rate-limited"}, cut)
			if err != nil {
				t.Fatal(err)
			}
			if want := tt.wantGiven(l); given > want || given < want-time.Second {
				t.Errorf("the re-measure was given %s, want %s", given, want)
			}
			earned := -1.0
			for _, c := range res.Criteria {
				if c.Name == "remediation" {
					earned = c.Earned
				}
			}
			if (earned > 0) != tt.credit || earned < 0 {
				t.Errorf("remediation earned %v, want credit %v: %+v", earned, tt.credit, res)
			}
			if st := l.Status(); st.ChecksLeft != MaxChecks-1 || st.State != Ready {
				t.Errorf("after the check: %+v, want one check used and the lab ready", st)
			}
		})
	}
}

// TestMeasureAfterEnd: a chart run that waited for the links while the lab ended
// finds no environment; it stops instead of reaching into a torn-down sandbox.
func TestMeasureAfterEnd(t *testing.T) {
	h := &fakeHost{workload: healthyThenFaulted}
	l := startLab(t, h, time.Hour)
	waitFor(t, l, func(st Status) bool { return st.State == Ready })
	l.Stop()
	ended(t, l)
	runs := h.runs
	if _, _, err := l.measure(context.Background(), 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("measure after the lab ended: err = %v, want context.Canceled", err)
	}
	if h.runs != runs {
		t.Errorf("measure after the lab ended ran the workload (%d runs, want %d)", h.runs, runs)
	}
}

// nodeEnv is an environment whose nodes carry their own injector and which can
// be lost (a Slurm job's agents).
type nodeEnv struct {
	fakeEnv
	lost chan error
}

func (e nodeEnv) Apply(ctx context.Context, node, kind string, params map[string]string, ttl time.Duration) (string, string, error) {
	e.h.mu.Lock()
	e.h.applied++
	id := fmt.Sprintf("n%d", e.h.applied)
	e.h.mu.Unlock()
	e.h.note("node apply " + node + " " + id)
	return id, "tc qdisc add dev rdma0 root tbf", nil
}

func (e nodeEnv) Revert(ctx context.Context, node, id string) error {
	e.h.note("node revert " + node + " " + id)
	return nil
}

func (e nodeEnv) Lost() <-chan error { return e.lost }

type nodeHost struct {
	*fakeHost
	lost chan error
}

func (h nodeHost) Up(ctx context.Context, env scenarios.Environment, ttl time.Duration, progress func(Progress)) (Env, error) {
	h.note("up")
	return nodeEnv{fakeEnv{h.fakeHost}, h.lost}, nil
}

// TestNodeFaultsAndLost: an environment with its own injector gets the lab's
// faults (the host's injector none), reverted in reverse order on their nodes;
// a lost one fails the lab, says so, and is not asked to revert through nodes
// that are gone.
func TestNodeFaultsAndLost(t *testing.T) {
	tests := []struct {
		name   string
		lose   bool
		want   State
		events []string
	}{
		{name: "TTL", want: Expired, events: []string{"up", "node apply node2 n1", "node apply node1 n2",
			"node revert node1 n2", "node revert node2 n1", "down"}},
		{name: "lost", lose: true, want: Failed, events: []string{"up", "node apply node2 n1", "node apply node1 n2", "down"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := nodeHost{&fakeHost{workload: healthyThenFaulted}, make(chan error, 1)}
			ttl := 300 * time.Millisecond
			if tt.lose {
				ttl = time.Minute
			}
			l := Start(context.Background(), Config{Provider: h, Faults: h.fakeHost, DataDir: t.TempDir(), TTL: ttl, NoStream: true, Log: quiet}, 1, testVariant(t))
			if tt.lose {
				waitFor(t, l, func(s Status) bool { return s.Confirmed })
				h.lost <- errors.New("Slurm job 7 ended (NODE_FAIL)")
			}
			ended(t, l)
			st := l.Status()
			if st.State != tt.want || st.Lost != tt.lose {
				t.Errorf("state %s lost %v, want %s %v", st.State, st.Lost, tt.want, tt.lose)
			}
			if tt.lose && (!strings.Contains(st.Failure, ErrLost.Error()) || !strings.Contains(st.Failure, "NODE_FAIL")) {
				t.Errorf("failure %q does not say the lab was lost and why", st.Failure)
			}
			if got := h.events(); !slices.Equal(got, tt.events) {
				t.Errorf("events %q, want %q", got, tt.events)
			}
		})
	}
}

func (h *fakeHost) runCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.runs
}

// TestWhichRunsTakeTheHost: only figures the grader compares a fix with are taken with
// the host to itself (a graded turn, which waits for other labs' chart runs); a
// baseline only the chart shows, and a fault's self-test, run beside them.
func TestWhichRunsTakeTheHost(t *testing.T) {
	tests := []struct {
		name        string
		remediation string // replaces the test scenario's
		// baselineWaits: the healthy run waits for the chart run in flight.
		baselineWaits bool
	}{
		{"nothing to measure", "", false},
		{"a fix to measure", "remediation: {measure: workload, min_ratio: 0.8}\n", true},
		{"a setting to tune", "remediation: {measure: workload, beat: 1.5}\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := strings.Replace(testScenario, "remediation: {measure: workload, min_ratio: 0.8}\n", tt.remediation, 1)
			if strings.Contains(tt.remediation, "beat") { // a tuning lab injects nothing
				text = strings.Replace(text, "faults:\n  - {kind: nic-rate, node: node2, params: {nic: rdma0, rate: \"${rate}mbit\"}}\n  - {kind: loss, node: node1, params: {nic: rdma0, percent: \"5%\"}}\n", "", 1)
			}
			sc, probs := scenarios.Parse("t.yaml", []byte(text), scenarios.Options{})
			if len(probs) > 0 {
				t.Fatal(probs)
			}
			turns := &Turns{Grace: time.Hour, Patience: time.Hour}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			chart, err := turns.Chart(ctx) // another lab's chart run, in flight throughout
			if err != nil {
				t.Fatal(err)
			}
			h := &fakeHost{workload: healthyThenFaulted}
			l := Start(context.Background(), Config{Provider: h, Faults: h, DataDir: t.TempDir(), TTL: time.Hour, NoStream: true, Log: quiet, Turns: turns}, 1, sc.Draw(1))
			t.Cleanup(func() { l.Stop(); l.Wait() })
			waitFor(t, l, func(s Status) bool { return s.Step == StepBaseline || s.Step == StepUntuned || s.State == Ready })
			if !tt.baselineWaits {
				waitFor(t, l, func(s Status) bool { return s.Confirmed })
				return
			}
			time.Sleep(50 * time.Millisecond)
			h.mu.Lock()
			runs := h.runs
			h.mu.Unlock()
			if runs != 0 {
				t.Fatalf("the baseline ran beside another lab's chart run (%d runs)", runs)
			}
			chart()
			waitFor(t, l, func(s Status) bool { return s.Confirmed })
		})
	}
}

// TestGradedRunsPrioritized: the runs the grader compares a fix with (the baseline,
// the re-measure) hold the environment's CPU priority, and give it back; the
// self-test and the chart's runs do not. An environment that cannot raise it still
// gets its figures.
func TestGradedRunsPrioritized(t *testing.T) {
	for _, tt := range []struct {
		name    string
		prioErr error
		want    []bool // runs 1 and 2 (baseline, self-test), then the re-measure
	}{
		{"priority", nil, []bool{true, false, true}},
		{"no priority to be had", errors.New("cgroup gone"), []bool{false, false, false}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := &fakeHost{workload: healthyThenFaulted, prioErr: tt.prioErr}
			l := Start(context.Background(), Config{Provider: h, Faults: h, DataDir: t.TempDir(), TTL: time.Hour, Log: quiet, Turns: &Turns{}}, 1, testVariant(t))
			t.Cleanup(func() { l.Stop(); l.Wait() })
			waitFor(t, l, func(s Status) bool { return s.Confirmed })
			waitFor(t, l, func(Status) bool { h.mu.Lock(); defer h.mu.Unlock(); return h.runs >= 3 }) // a chart run
			d := grader.Diagnosis{Class: "nic-rate-limited", Location: map[string]string{"node": "node2", "nic": "rdma0"}}
			res, err := l.Grade(context.Background(), d)
			if err != nil {
				t.Fatal(err)
			}
			if i := slices.IndexFunc(res.Criteria, func(c grader.Criterion) bool { return c.Name == "remediation" }); i < 0 || res.Criteria[i].Earned == 0 {
				t.Errorf("the fixed lab earned no remediation credit: %+v", res)
			}
			l.Wait()
			h.mu.Lock()
			defer h.mu.Unlock()
			runs := h.prioritized
			if len(runs) < 4 {
				t.Fatalf("runs %v: want a baseline, a self-test, a chart run and a re-measure", runs)
			}
			got := []bool{runs[0], runs[1], runs[len(runs)-1]}
			if !slices.Equal(got, tt.want) || slices.Contains(runs[2:len(runs)-1], true) {
				t.Errorf("prioritized runs %v: want %v first, second and last, none between", runs, tt.want)
			}
			if h.held != 0 {
				t.Errorf("%d priorities not given back", h.held)
			}
		})
	}
}

// TestSelfTestCutOnHang: a fault that hangs the workload is confirmed once the run
// has taken longer than any a fix could pass with (the healthy run's time over the
// ratio, plus 2 s), not after the re-measure's margin; the cut run puts no point on
// the chart.
func TestSelfTestCutOnHang(t *testing.T) {
	var limit time.Duration // what the self-test's run was given
	hang := blockOn(2, healthyThenFaulted)
	h := &fakeHost{workload: func(ctx context.Context, n int) (float64, error) {
		if d, ok := ctx.Deadline(); ok && n == 2 {
			limit = time.Until(d)
		}
		return hang(ctx, n)
	}}
	l := startLab(t, h, time.Hour)
	waitFor(t, l, func(s Status) bool { return s.Confirmed })
	// The baseline took next to nothing: 2 s, where a re-measure gets 5 s and more.
	if limit <= 0 || limit > 2100*time.Millisecond || limit >= l.cutAfter(0.8) {
		t.Errorf("the hanging self-test was given %s, want at most 2 s and less than a re-measure's %s", limit, l.cutAfter(0.8))
	}
	points, _, stop := l.Samples().Subscribe()
	stop()
	var busbw []float64
	for _, p := range points {
		if p.Type == "sample" {
			busbw = append(busbw, p.BusBW)
		}
	}
	if !slices.Equal(busbw, []float64{1}) {
		t.Errorf("chart points %v, want the baseline's only", busbw)
	}
}
