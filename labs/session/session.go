// Package session runs one lab from start to end, top-down in one place:
//
//	environment up → learner's terminals (recorded) → healthy baseline → inject
//	(journaled; the chart marks the moment) → ready → self-test (the fault must
//	really hurt; scoring confirmed) → workload streams busbw → checks → grade
//	(evidence from the recordings, remediation re-measured) → revert → down
//
// The terminals open as soon as the environment is up, so the learner works while
// the baseline and the self-test run; grading waits for the self-test. A Lab always
// ends with its faults reverted (in reverse order) and its environment down, once:
// on grading, on Stop, on TTL expiry and when its context is cancelled. A lab whose
// self-test fails is not scored and says why, so a flaky host is never the learner's
// fault.
package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/commlab/commlab/grader"
	"github.com/commlab/commlab/injector"
	"github.com/commlab/commlab/scenarios"
)

// Env is a running lab environment, whichever backend built it: labs/backend's
// sandbox of network namespaces or GPU node on this host, labs/slurm's job on a
// cluster's nodes. Optional interfaces add what some have (NodeFaults, Losable,
// LearnerFiles, Renewer, Prioritizer).
type Env interface {
	// ID names the environment (the sandbox id).
	ID() string
	// Nodes lists the node names.
	Nodes() []string
	// Target is where the injector applies a fault on node.
	Target(node string) injector.Target
	// Shell starts the learner's login shell in node, with rc as its bash rc file.
	Shell(ctx context.Context, node, rc string) (PTY, error)
	// Workload runs the lab's workload once, with env added to every process and its
	// output copied to out, and returns its figure in GB/s (w.Metric: the average bus
	// bandwidth of the bench or nccl-tests, or a PCIe copy rate). A run that fails is
	// reported wrapped in ErrWorkloadFailed.
	Workload(ctx context.Context, w *scenarios.Workload, env []string, out io.Writer) (float64, error)
	// Down removes everything the environment created.
	Down(ctx context.Context) error
}

// NodeFaults is an Env whose faults are applied on its nodes rather than by
// this host's injector (a Slurm job's node agents, each with its own journal).
// The lab applies and reverts its faults through it; Config.Faults still says
// which kinds this host supports and which change a login shell.
type NodeFaults interface {
	// Apply applies a fault on node and returns its id and the equivalent shell command.
	Apply(ctx context.Context, node, kind string, params map[string]string, ttl time.Duration) (id, command string, err error)
	// Revert reverts fault id on node.
	Revert(ctx context.Context, node, id string) error
}

// Prioritizer is an Env whose processes share this host's CPUs with other labs'.
// Prioritize gives its processes the CPU before every other lab's until restore is
// called; a graded run holds it (see Lab.measure), so a figure the grader compares
// is the lab's own, not what another lab's chart run or learner left of the host.
type Prioritizer interface {
	Prioritize() (restore func() error, err error)
}

// Losable is an Env that can be lost from under a running lab (its Slurm job
// ended, a node's agent stayed away). Lost yields why, once; the lab then
// ends as Failed with Status.Lost set.
type Losable interface {
	Lost() <-chan error
}

// PTY is a learner's terminal.
type PTY interface {
	io.ReadWriter
	Resize(rows, cols uint16) error
	// Close ends the shell.
	Close() error
}

// Provider brings environments up.
type Provider interface {
	// Up creates the environment a scenario asks for; progress is told each step.
	Up(ctx context.Context, env scenarios.Environment, ttl time.Duration, progress func(Progress)) (Env, error)
	// Check says, without starting anything, whether this host can run env (a gpu
	// lab needs a GPU node), with an error that says what is missing.
	Check(env scenarios.Environment) error
}

// Progress is what a Provider tells while its environment comes up.
type Progress struct {
	// Note is a line for the lab's log.
	Note string
	// Queue is set while the environment waits in a batch scheduler's queue
	// (a Slurm job pending), nil once it has its nodes.
	Queue *Queue
}

// Queue is where a lab waits in a batch scheduler's queue; the lab page shows it.
type Queue struct {
	// Position is the lab's place among the pending jobs of its partition (1:
	// next); 0 when unknown.
	Position int `json:"position,omitempty"`
	// Reason is the scheduler's reason code as squeue prints it (%r):
	// Resources, Priority, Reservation, QOSMaxJobsPerUserLimit...
	Reason string `json:"reason"`
}

// Faults applies and reverts faults (the injector).
type Faults interface {
	// Apply applies a fault and returns its id and the equivalent shell command.
	Apply(ctx context.Context, t injector.Target, kind string, params map[string]string, ttl time.Duration) (id, command string, err error)
	Revert(ctx context.Context, id string) error
	// Supports says, without applying anything, whether this host can apply kind.
	Supports(ctx context.Context, kind string) error
	// ChangesLogin says whether kind changes what a login shell starts with (a
	// profile.d script): the learner's shells then open after the faults.
	ChangesLogin(kind string) bool
}

// State is where a lab is in its life.
type State string

// States.
const (
	Starting State = "starting"
	Ready    State = "ready"
	Grading  State = "grading"
	Done     State = "done"
	Failed   State = "failed"
	Expired  State = "expired"
	Stopped  State = "stopped"
)

// Config is what a lab needs from its surroundings.
type Config struct {
	Provider Provider
	Faults   Faults
	// DataDir holds recordings under <DataDir>/recordings/<lab id>/.
	DataDir string
	// TTL is how long a lab may run (default 45 minutes).
	TTL time.Duration
	// Turns, if set, is shared by the labs whose workloads run on this host: their
	// graded runs take turns and pause the live charts (see Turns).
	Turns *Turns
	// NoStream keeps the workload from running in the background for the live chart
	// (measurements for the self-test and the remediation check still run). For hosts
	// that serve many labs at once, and for benchmarks of the terminal path.
	NoStream bool
	Log      *slog.Logger
}

// Lab is one learner's run of one scenario variant.
type Lab struct {
	ID      string
	Learner int64
	Variant *scenarios.Variant
	Started time.Time

	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc
	log    *slog.Logger

	// wl serialises workload runs: a measurement never shares the links with a
	// streaming run.
	wl sync.Mutex

	mu sync.Mutex
	// expires is when the lab ends (Status tells it); Extend moves it, and the
	// timer that cancels ctx then.
	expires time.Time
	expiry  *time.Timer
	// owed is the time extensions gave while the lab was Starting: Extend gives it
	// once the lab is Ready, when its environment and faults are all in place.
	owed      time.Duration
	state     State
	step      string
	progress  [2]int
	queue     *Queue
	queuedAt  time.Time // when queue was set: the lab's clock stands still until it clears
	failure   string
	env       Env
	lost      bool
	faults    []appliedFault
	injected  []string
	terminals map[string]*Terminal
	samples   *Samples
	hints     map[int]bool
	// given are the hints an instructor revealed: open, and free.
	given     map[int]bool
	checks    int
	lastCheck *grader.Result
	revealed  bool
	baseline  float64
	// baselineTook is how long the healthy run took: it bounds a grading's re-measure.
	baselineTook time.Duration
	faulted      float64
	result       *grader.Result
	// confirmed is closed once the self-test has shown the fault hurts (or the lab
	// has none to run); grading waits for it.
	confirmed chan struct{}
	// up is closed once the lab is Ready: its shells are open and the faults in.
	up chan struct{}
	// stopStream cancels the chart's workload run in flight, so a grading
	// measurement does not wait for it.
	stopStream context.CancelFunc
	ended      chan struct{}
}

// MaxChecks is how many times a learner may check an answer without ending the lab;
// each check costs grader.CheckCost, as a hint does.
const MaxChecks = 3

// FaultEvent labels the chart's mark of the moment the fault appears. It names no
// fault: the kind is for the debrief only.
const FaultEvent = "fault"

// DefaultTTL is how long a lab may run unless Config says otherwise.
const DefaultTTL = 45 * time.Minute

// ErrNotReady is returned for actions that need a ready lab.
var ErrNotReady = errors.New("the lab is not ready")

// Start begins a lab in the background; Wait or State tell how it goes. parent bounds
// the whole lab (the server's lifetime); the lab also ends at its TTL.
func Start(parent context.Context, cfg Config, learner int64, v *scenarios.Variant) *Lab {
	return start(parent, cfg, NewID(), learner, v)
}

func start(parent context.Context, cfg Config, id string, learner int64, v *scenarios.Variant) *Lab {
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	now := time.Now()
	l := &Lab{
		ID: id, Learner: learner, Variant: v, Started: now, expires: now.Add(cfg.TTL),
		cfg: cfg, state: Starting, terminals: map[string]*Terminal{}, hints: map[int]bool{}, given: map[int]bool{},
		samples: newSamples(600), ended: make(chan struct{}), confirmed: make(chan struct{}), up: make(chan struct{}),
	}
	l.log = cfg.Log.With("lab", l.ID, "scenario", v.Scenario.ID, "learner", learner)
	l.ctx, l.cancel = context.WithCancel(context.WithoutCancel(parent))
	l.expiry = time.AfterFunc(cfg.TTL, l.cancel)
	go func() {
		// The parent's end (server shutdown) ends the lab too, with a clean teardown.
		select {
		case <-parent.Done():
			l.cancel()
		case <-l.ended:
		}
	}()
	go l.run()
	return l
}

// NewID returns a new lab id: 32 hex digits, random.
func NewID() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// Steps of the start-up, for the progress bar: keys of the web i18n catalogue.
const (
	StepUp       = "lab.step.up"
	StepQueued   = "lab.step.queued" // a part of StepUp: the environment waits in a queue
	StepShells   = "lab.step.shells"
	StepBaseline = "lab.step.baseline"
	StepInject   = "lab.step.inject"
	StepSelfTest = "lab.step.selftest"
	StepReady    = "lab.step.ready"
	startSteps   = 6
)

// StepUntuned replaces StepBaseline and StepSelfTest in a tuning lab that injects
// nothing: both runs measure the untuned start.
const StepUntuned = "lab.step.untuned"

func (l *Lab) setStep(n int, step string) {
	l.mu.Lock()
	l.step, l.progress = step, [2]int{n, startSteps}
	l.mu.Unlock()
	l.log.Info("lab step", "step", step)
}

// upProgress follows the environment's start-up: its notes go to the log, its
// queue state to Status. The lab's clock stands still while it waits in the
// queue: its TTL is the job's time limit, which runs from the job's start.
func (l *Lab) upProgress(p Progress) {
	if p.Note != "" {
		l.log.Info("environment", "step", p.Note)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case p.Queue != nil && l.queue == nil:
		l.expiry.Stop()
		l.queuedAt = time.Now()
	case p.Queue == nil && l.queue != nil:
		l.expires = l.expires.Add(time.Since(l.queuedAt))
		l.expiry.Reset(time.Until(l.expires))
	}
	l.queue, l.step = p.Queue, StepUp
	if p.Queue != nil {
		l.step = StepQueued
	}
}

// run is the lab's life, top-down.
func (l *Lab) run() {
	defer close(l.ended)
	defer l.teardown()
	s := l.Variant.Scenario
	ctx := l.ctx

	if r := s.Remediation; r != nil && r.Measure == scenarios.MeasureAlertRules {
		if _, err := Promtool(); err != nil {
			l.fail(err)
			return
		}
	}
	l.setStep(1, StepUp)
	// ctx cuts Up short, but once up the environment lives until teardown has
	// reverted the faults and taken it down: a backend that ends it with its
	// context (a netns sandbox does) would race those reverts when the lab stops.
	upCtx, endUp := context.WithCancel(context.WithoutCancel(ctx))
	stopUp := context.AfterFunc(ctx, endUp)
	env, err := l.cfg.Provider.Up(upCtx, s.Environment, l.cfg.TTL, l.upProgress)
	stopUp()
	l.upProgress(Progress{})
	if err != nil {
		l.fail(fmt.Errorf("the lab environment could not start: %w", err))
		return
	}
	l.mu.Lock()
	l.env = env
	l.mu.Unlock()
	if lo, ok := env.(Losable); ok {
		go l.watchLost(lo.Lost())
	}

	faults, err := l.Variant.Faults()
	if err != nil {
		l.fail(err)
		return
	}
	// Shells open at once, so the learner works while the baseline runs, unless a
	// fault changes what a login shell starts with: shells opened before it would
	// not show it, so they open once the faults are in.
	late := slices.ContainsFunc(faults, func(f scenarios.Fault) bool { return l.cfg.Faults.ChangesLogin(f.Kind) })
	openShells := func() bool {
		l.setStep(2, StepShells)
		for _, node := range l.terminalNodes() {
			t, err := openTerminal(ctx, env, node, l.recordingPath(node), l.log)
			if err != nil {
				l.fail(fmt.Errorf("open a shell on %s: %w", node, err))
				return false
			}
			l.mu.Lock()
			l.terminals[node] = t
			l.mu.Unlock()
		}
		return true
	}
	if !late && !openShells() {
		return
	}

	// The chart gets a real healthy window before the fault; a lab with a fix to
	// check also needs the figure.
	tuning := s.Remediation != nil && s.Remediation.Beat > 0 && len(faults) == 0
	baselineStep, selfTestStep := StepBaseline, StepSelfTest
	if tuning {
		baselineStep, selfTestStep = StepUntuned, StepUntuned
	}
	// Only a figure the grader compares a fix with is taken with the host to itself.
	run := l.sample
	if s.Remediation != nil {
		run = l.measure
	}
	if s.Workload != nil {
		l.setStep(3, baselineStep)
		bw, took, err := run(ctx, 0)
		l.baselineTook = took // the run's own time: a turn waited for is not the workload's
		switch {
		case err != nil && ctx.Err() != nil:
			l.fail(err)
			return
		case err != nil && s.Remediation != nil:
			l.fail(fmt.Errorf("self-test: the healthy baseline could not be measured: %w", err))
			return
		case err != nil:
			l.log.Warn("baseline for the chart", "err", err) // only the chart misses it
		}
		l.baseline = bw
		l.samples.add(bw) // the chart starts from the healthy level
	}

	if len(faults) > 0 {
		l.setStep(4, StepInject)
	}
	for _, f := range faults {
		ttl, bound := l.faultTTL(f.TTL)
		id, cmd, err := l.applyFault(ctx, env, f, ttl)
		if err != nil {
			l.fail(fmt.Errorf("inject %s on %s: %w", f.Kind, f.Node, err))
			return
		}
		l.mu.Lock()
		id.bound = bound
		l.faults = append(l.faults, id)
		l.injected = append(l.injected, f.Node+": "+cmd)
		l.mu.Unlock()
	}
	if len(faults) > 0 {
		l.samples.event(FaultEvent)
	}
	if late && !openShells() {
		return
	}
	l.mu.Lock()
	if l.state == Starting {
		l.state = Ready
		close(l.up)
	}
	owed := l.owed
	l.owed = 0
	l.mu.Unlock()
	if owed > 0 {
		if end, err := l.extend(ctx, owed); err != nil {
			l.log.Warn("the extension given while the lab started could not be applied: the lab keeps its end", "owed", owed, "err", err)
		} else {
			l.log.Info("extension given while the lab started applied", "until", end)
		}
	}

	if l.baseline > 0 && s.Remediation != nil {
		l.setStep(5, selfTestStep)
		// The self-test shows the fault bites: a run slower than any a fix could pass
		// with has shown it, so it is cut there (a hanging fault would hold the links
		// for minutes). Only a tuning lab's self-test is a figure to beat: it runs whole,
		// with the host to itself.
		var limit time.Duration
		run = l.measure
		if s.Remediation.Beat == 0 {
			limit = l.slowerThanAFix(s.Remediation.MinRatio)
			run = l.sample
		}
		bw, _, err := run(ctx, limit)
		if err != nil && !errors.Is(err, ErrWorkloadFailed) {
			l.fail(fmt.Errorf("self-test: %w", err))
			return
		}
		cut := errors.Is(err, errCut)
		l.faulted = bw
		if tuning {
			// Nothing was injected: the baseline measured the same untuned setting. The
			// better of the two runs is the start, so one unlucky run cannot lower the bar.
			l.faulted = max(bw, l.baseline)
		}
		if !cut { // a cut run measured nothing: no point on the chart
			l.samples.add(bw)
		}
		if s.Remediation.Beat > 0 && bw <= 0 {
			l.fail(fmt.Errorf("self-test: the untuned workload measured nothing to beat: start the lab again"))
			return
		}
		// A tuning lab starts from wherever the untuned setting puts it: Beat is relative.
		if s.Remediation.Beat == 0 && bw >= s.Remediation.MinRatio*l.baseline {
			l.fail(fmt.Errorf("self-test: the fault did not slow the workload (%.3f GB/s with it, %.3f without): this lab is not scored, start it again", bw, l.baseline))
			return
		}
	}
	close(l.confirmed)
	l.setStep(6, StepReady)
	if s.Workload != nil && !l.cfg.NoStream {
		go l.streamWorkload(ctx)
	}
	<-ctx.Done()
	l.mu.Lock()
	if l.state == Ready || l.state == Starting || l.state == Grading {
		l.state = Expired
	}
	l.mu.Unlock()
}

// appliedFault is a fault in place: what was applied (Extend applies it again when
// its helper cannot be renewed) and the injector's id; bound says its deadline is
// the lab's end, so Extend renews it.
type appliedFault struct {
	fault scenarios.Fault
	id    string
	bound bool
}

// applyFault applies f on env, through its nodes when they carry their own
// injector (NodeFaults), else through this host's.
func (l *Lab) applyFault(ctx context.Context, env Env, f scenarios.Fault, ttl time.Duration) (appliedFault, string, error) {
	var id, cmd string
	var err error
	if nf, ok := env.(NodeFaults); ok {
		id, cmd, err = nf.Apply(ctx, f.Node, f.Kind, f.Params, ttl)
	} else {
		id, cmd, err = l.cfg.Faults.Apply(ctx, env.Target(f.Node), f.Kind, f.Params, ttl)
	}
	return appliedFault{fault: f, id: id}, cmd, err
}

func (l *Lab) revertFault(ctx context.Context, env Env, f appliedFault) error {
	if nf, ok := env.(NodeFaults); ok {
		return nf.Revert(ctx, f.fault.Node, f.id)
	}
	return l.cfg.Faults.Revert(ctx, f.id)
}

// ErrLost is the failure of a lab whose environment went away under it.
var ErrLost = errors.New("the lab's machines were lost")

// watchLost fails the lab when its environment is lost.
func (l *Lab) watchLost(lost <-chan error) {
	select {
	case err := <-lost:
		l.mu.Lock()
		running := l.state == Starting || l.state == Ready || l.state == Grading
		l.lost = running
		l.mu.Unlock()
		if running {
			l.fail(fmt.Errorf("%w: %v. Its faults were reverted on the nodes; start the lab again", ErrLost, err))
		}
	case <-l.ctx.Done():
	}
}

// fail ends a lab that could not go on. A step that failed because the lab was
// stopped or timed out is not a failure: the lab keeps saying Stopped or Expired.
func (l *Lab) fail(err error) {
	l.mu.Lock()
	switch {
	case l.state == Stopped:
	case l.ctx.Err() != nil:
		l.state = Expired
	default:
		l.state, l.failure = Failed, err.Error()
		l.log.Warn("lab failed", "err", err)
	}
	l.mu.Unlock()
	l.cancel()
}

// faultTTL is how long a fault with its own ttl (0: none) stays: the lab's time
// left at most. bound says it ends with the lab, so Extend renews it.
func (l *Lab) faultTTL(own time.Duration) (ttl time.Duration, bound bool) {
	l.mu.Lock()
	left := time.Until(l.expires)
	l.mu.Unlock()
	if own == 0 || own >= left {
		return left, true
	}
	return own, false
}

// teardown reverts every fault and takes the environment down, whatever happened.
func (l *Lab) teardown() {
	l.expiry.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l.mu.Lock()
	terms, faults, env, lost := l.terminals, l.faults, l.env, l.lost
	l.faults, l.env = nil, nil
	l.mu.Unlock()
	for _, t := range terms {
		t.Close() // frees its scrollback too: an ended lab keeps only its recordings
	}
	for i := len(faults) - 1; i >= 0 && !lost; i-- { // a lost lab's nodes revert their own
		if err := l.revertFault(ctx, env, faults[i]); err != nil {
			l.log.Error("revert fault", "fault", faults[i].id, "err", err)
		}
	}
	if env != nil {
		if err := env.Down(ctx); err != nil {
			l.log.Error("environment down", "err", err)
		}
	}
	l.log.Info("lab ended")
}

// Stop ends the lab now, at the learner's request.
func (l *Lab) Stop() {
	l.mu.Lock()
	if l.state == Ready || l.state == Starting || l.state == Grading {
		l.state = Stopped
	}
	l.mu.Unlock()
	l.cancel()
}

// Running is true until the lab is stopped, graded, failed or expired; its teardown
// may still be under way after.
func (l *Lab) Running() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state == Starting || l.state == Ready || l.state == Grading
}

// Wait blocks until the lab has ended and its teardown is done.
func (l *Lab) Wait() { <-l.ended }

// Up is closed once the lab is Ready (shells open, faults in); never if it
// ends before.
func (l *Lab) Up() <-chan struct{} { return l.up }

// Ended is closed when the lab has ended and its teardown is done.
func (l *Lab) Ended() <-chan struct{} { return l.ended }

// Status is a snapshot for the UI.
type Status struct {
	State    State          `json:"state"`
	Step     string         `json:"step"`
	Progress map[string]int `json:"progress"`
	Failure  string         `json:"failure,omitempty"`
	Expires  time.Time      `json:"expires"`
	Nodes    []string       `json:"nodes"`
	// Sandbox is the environment's id (namespaces cl-<sandbox>-…), once it is up.
	Sandbox string `json:"sandbox,omitempty"`
	// Confirmed: the fault is in place and the self-test showed it hurts, so an
	// answer can be graded at once.
	Confirmed bool `json:"confirmed"`
	// ChecksLeft is how many answer checks remain before the final submission.
	ChecksLeft int `json:"checks_left"`
	// Lost: the lab failed because its environment went away (ErrLost).
	Lost bool `json:"lost,omitempty"`
	// Queue is set while the lab waits in a batch scheduler's queue.
	Queue *Queue `json:"queue,omitempty"`
}

// Status returns where the lab is.
func (l *Lab) Status() Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := Status{State: l.state, Step: l.step, Failure: l.failure, Expires: l.expires, Lost: l.lost,
		Progress: map[string]int{"done": l.progress[0], "total": l.progress[1]}}
	for n := range l.terminals {
		st.Nodes = append(st.Nodes, n)
	}
	if l.env != nil {
		st.Sandbox = l.env.ID()
	}
	if l.queue != nil {
		q := *l.queue
		st.Queue = &q
		st.Expires = l.expires.Add(time.Since(l.queuedAt)) // the clock stands still
	}
	select {
	case <-l.confirmed:
		st.Confirmed = l.state == Ready
	default:
	}
	st.ChecksLeft = MaxChecks - l.checks
	slices.Sort(st.Nodes)
	return st
}

func (l *Lab) terminalNodes() []string {
	if t := l.Variant.Scenario.Environment.Terminals; len(t) > 0 {
		return t
	}
	return l.env.Nodes()
}

// Terminal returns the terminal of a node.
func (l *Lab) Terminal(node string) (*Terminal, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.terminals[node]
	return t, ok && (l.state == Starting || l.state == Ready || l.state == Grading)
}

// Samples returns the lab's busbw time series.
func (l *Lab) Samples() *Samples { return l.samples }

// Hint reveals hint i and records its use; the cost applies at grading.
func (l *Lab) Hint(i int) (scenarios.Hint, error) {
	hs := l.Variant.Scenario.Hints
	if i < 0 || i >= len(hs) {
		return scenarios.Hint{}, fmt.Errorf("no hint %d", i+1)
	}
	l.mu.Lock()
	l.hints[i] = true
	l.mu.Unlock()
	return scenarios.Hint{Text: l.Variant.Expand(hs[i].Text), Cost: hs[i].Cost}, nil
}

// GiveHint opens hint i for free (an instructor revealed it to the cohort): it
// costs nothing at grading, even if the learner had opened it before.
func (l *Lab) GiveHint(i int) error {
	if i < 0 || i >= len(l.Variant.Scenario.Hints) {
		return fmt.Errorf("no hint %d", i+1)
	}
	l.mu.Lock()
	l.given[i] = true
	l.mu.Unlock()
	return nil
}

// HintsUsed lists the hints the learner opened and pays for: those an instructor
// gave are not among them.
func (l *Lab) HintsUsed() []int {
	return l.hintsWhere(func(i int) bool { return l.hints[i] && !l.given[i] })
}

// HintsOpen lists every hint the learner can read: opened or given.
func (l *Lab) HintsOpen() []int {
	return l.hintsWhere(func(i int) bool { return l.hints[i] || l.given[i] })
}

func (l *Lab) hintsWhere(ok func(i int) bool) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int
	for i := range l.Variant.Scenario.Hints {
		if ok(i) {
			out = append(out, i)
		}
	}
	return out
}

// Injected lists, per fault, the node and the shell command equivalent to what was
// injected. Only for the debrief, after grading.
func (l *Lab) Injected() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.injected...)
}

// Result returns the final grading result, nil before the final submission.
func (l *Lab) Result() *grader.Result {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.result
}

// LastCheck returns the result of the latest check, nil before any.
func (l *Lab) LastCheck() *grader.Result {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastCheck
}

// Revealed says whether the debrief and the injected commands may be shown: after a
// passed submission, or once the learner gave up.
func (l *Lab) Revealed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.revealed || (l.result != nil && l.result.Passed)
}

// ErrNotRunning is returned for a fault added to a lab that is not ready.
var ErrNotRunning = errors.New("the lab is not running")

// Inject adds a fault to a ready lab (an instructor's extra fault), journaled and
// reverted with the lab's own. It returns the equivalent shell command, which, like
// the scenario's faults, is shown to the learner only in the debrief.
func (l *Lab) Inject(ctx context.Context, f scenarios.Fault) (string, error) {
	l.mu.Lock()
	env, state := l.env, l.state
	l.mu.Unlock()
	if env == nil || state != Ready {
		return "", ErrNotRunning
	}
	if !slices.Contains(env.Nodes(), f.Node) {
		return "", fmt.Errorf("no node %q in this lab", f.Node)
	}
	ttl, bound := l.faultTTL(f.TTL)
	id, cmd, err := l.applyFault(ctx, env, f, ttl)
	if err != nil {
		return "", fmt.Errorf("inject %s on %s: %w", f.Kind, f.Node, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.env == nil {
		// The lab ended while the fault went in: its teardown has passed, revert here.
		rctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = l.revertFault(rctx, env, id)
		return "", ErrNotRunning
	}
	id.bound = bound
	l.faults = append(l.faults, id)
	l.injected = append(l.injected, f.Node+": "+cmd)
	l.samples.event(FaultEvent)
	l.log.Info("extra fault", "fault", id.id)
	return f.Node + ": " + cmd, nil
}

// GiveUp ends the lab if it still runs and reveals the debrief.
func (l *Lab) GiveUp() {
	l.mu.Lock()
	l.revealed = true
	l.mu.Unlock()
	l.Stop()
}

// Renewer is implemented by an Env and by Faults that can move their own expiry:
// the sandbox's teardown timer, a fault's deadline (the injector's watchdog).
type Renewer interface {
	// Renew moves the expiry to now+ttl; on error the old one holds.
	Renew(ctx context.Context, id string, ttl time.Duration) error
}

// ErrCannotExtend is returned when a lab's time cannot be extended.
var ErrCannotExtend = errors.New("this lab's time cannot be extended")

// MaxExtend bounds what one extension adds.
const MaxExtend = 4 * time.Hour

// Extend gives a running lab d more time (an instructor's extension) and returns its
// new end. A lab still Starting owes it until it is Ready, when its environment is up
// and its faults are in: then extend gives it, and Status tells the new end.
func (l *Lab) Extend(ctx context.Context, d time.Duration) (time.Time, error) {
	if d <= 0 || d > MaxExtend {
		return time.Time{}, fmt.Errorf("extend by %s: want more than 0 and at most %s", d, MaxExtend)
	}
	l.mu.Lock()
	if l.state == Starting {
		if err := l.canExtend(l.env, len(l.Variant.Scenario.Faults) > 0); err != nil {
			l.mu.Unlock()
			return time.Time{}, err
		}
		l.owed += d
		end := l.expires.Add(l.owed)
		l.mu.Unlock()
		return end, nil
	}
	l.mu.Unlock()
	return l.extend(ctx, d)
}

// canExtend says whether what ends a lab on env from outside can be moved: the
// environment's teardown timer, and with faults the injector's deadlines (env nil:
// not up yet, only the faults' side is known).
func (l *Lab) canExtend(env Env, faults bool) error {
	if _, ok := env.(Renewer); env != nil && !ok {
		return ErrCannotExtend
	}
	if !faults {
		return nil
	}
	if _, ok := l.cfg.Faults.(Renewer); !ok {
		return ErrCannotExtend
	}
	if _, onNodes := env.(NodeFaults); onNodes {
		return ErrCannotExtend // faults applied through a node's agent are not renewed yet
	}
	return nil
}

// extend moves a Ready or Grading lab's end by d. What ends the lab from outside it
// moves first, then the lab's own timer: the faults bound to its end (the
// injector's watchdog; a fault whose helper stops at the deadline it was started
// with is applied again, see rearm), then its environment (its teardown timer and
// the state sweeps read). A step that fails leaves the lab's own end where it was,
// and its teardown there reverts every fault and takes the environment down: a
// renewed deadline only ever outlives the lab as a backstop.
func (l *Lab) extend(ctx context.Context, d time.Duration) (time.Time, error) {
	l.mu.Lock()
	env, state, end := l.env, l.state, l.expires.Add(d)
	var bound []appliedFault
	for _, f := range l.faults {
		if f.bound {
			bound = append(bound, f)
		}
	}
	l.mu.Unlock()
	if env == nil || (state != Ready && state != Grading) {
		return time.Time{}, ErrNotRunning
	}
	if err := l.canExtend(env, len(bound) > 0); err != nil {
		return time.Time{}, err
	}
	ttl := time.Until(end)
	for _, f := range bound {
		err := l.cfg.Faults.(Renewer).Renew(ctx, f.id, ttl)
		if errors.Is(err, injector.ErrFixedDeadline) {
			err = l.rearm(ctx, env, f, ttl)
		}
		if err != nil {
			return time.Time{}, fmt.Errorf("%w: fault %s: %w", ErrCannotExtend, f.id, err)
		}
	}
	if err := env.(Renewer).Renew(ctx, env.ID(), ttl); err != nil {
		return time.Time{}, fmt.Errorf("%w: environment: %w", ErrCannotExtend, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx.Err() != nil {
		return time.Time{}, ErrNotRunning
	}
	l.expires = end
	l.expiry.Reset(time.Until(end))
	l.log.Info("lab extended", "until", end)
	return end, nil
}

// rearm renews a fault whose helper stops at the deadline it was started with
// (nic-flap, congestion) the only way it can be: reverted, then applied again with
// ttl, under a new id. The workload waits meanwhile (a chart's run in flight gives
// way), so no measurement sees the moment between. A fault that cannot be applied
// again fails the lab: without it the lab is not the one scored.
func (l *Lab) rearm(ctx context.Context, env Env, f appliedFault, ttl time.Duration) error {
	l.mu.Lock()
	if l.stopStream != nil {
		l.stopStream()
	}
	l.mu.Unlock()
	l.wl.Lock()
	defer l.wl.Unlock()
	if err := l.revertFault(ctx, env, f); err != nil {
		return fmt.Errorf("revert to apply again: %w", err)
	}
	again, _, err := l.applyFault(ctx, env, f.fault, ttl)
	if err != nil {
		l.replaceFault(f.id, nil) // reverted already
		l.fail(fmt.Errorf("the lab's time was extended, but its fault could not be applied again (%v): this lab is not scored, start it again", err))
		return fmt.Errorf("apply again: %w", err)
	}
	again.bound = true
	if !l.replaceFault(f.id, &again) {
		// The lab ended meanwhile: its teardown has passed, revert here.
		_ = l.revertFault(context.WithoutCancel(ctx), env, again)
		return ErrNotRunning
	}
	l.log.Info("fault applied again for the extension", "fault", f.id, "now", again.id)
	return nil
}

// replaceFault puts g (nil: nothing) in the place of fault id and says whether id
// was still there.
func (l *Lab) replaceFault(id string, g *appliedFault) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := slices.IndexFunc(l.faults, func(f appliedFault) bool { return f.id == id })
	switch {
	case i < 0:
		return false
	case g == nil:
		l.faults = slices.Delete(l.faults, i, i+1)
	default:
		l.faults[i] = *g
	}
	return true
}
