// Package chapters plays the chapters' labs end to end, as root, on real network
// namespaces: a scripted learner types into a lab's terminals, reads back what they
// printed, and the grader's verdicts on its work are checked. The tests here play one
// lab per chapter; the harness (StartLab, Play, Learner, Verdicts) serves any test
// that drives a real lab.
package chapters

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commlab/commlab/grader"
	"github.com/commlab/commlab/injector"
	"github.com/commlab/commlab/labs/backend"
	"github.com/commlab/commlab/labs/record"
	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/labs/topology"
	"github.com/commlab/commlab/scenarios"

	"github.com/commlab/commlab/internal/testenv"
)

// StartLab starts a lab of a shipped scenario with a given seed, as root, on real
// namespaces, and tears it down when the test ends.
func StartLab(t *testing.T, id string, seed uint64) *session.Lab {
	t.Helper()
	testenv.RequireRoot(t, "lab sandboxes")
	sc := scenario(t, id)
	data := t.TempDir()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	inj, err := backend.OpenInjector(injector.Options{DataDir: data, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	l := session.Start(context.Background(), session.Config{
		Provider: backend.Local{DataDir: data, Exe: Binary(t), Log: log},
		Faults:   backend.Faults{In: inj},
		DataDir:  data,
		Turns:    &turns,
		TTL:      10 * time.Minute,
		Log:      log,
	}, 1, sc.Draw(seed))
	t0 := time.Now()
	t.Cleanup(func() {
		t1 := time.Now()
		l.Stop()
		l.Wait()
		t.Logf("lab played %.1fs, teardown %.1fs", t1.Sub(t0).Seconds(), time.Since(t1).Seconds())
		if left, _ := inj.List(); len(left) > 0 {
			t.Errorf("faults left in the journal after the lab: %+v", left)
		}
	})
	deadline := time.Now().Add(4 * time.Minute)
	var steps []string // where the start's time went, for whoever makes it faster
	for {
		st := l.Status()
		if step := fmt.Sprintf("%s@%.1fs", st.Step, time.Since(t0).Seconds()); len(steps) == 0 || !strings.HasPrefix(steps[len(steps)-1], st.Step+"@") {
			steps = append(steps, step)
		}
		if st.State == session.Ready {
			t.Logf("lab ready: %s", strings.Join(steps, ", "))
			return l
		}
		if st.State == session.Failed || time.Now().After(deadline) {
			t.Fatalf("lab did not become ready: %+v", st)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// turns is shared by the labs a test process plays: their graded runs (each lab's
// baseline, a check, the re-measure after a fix) take turns on the host, as a
// server's labs do, with a server's patience and grace. A chart run or a learner's
// command may still run beside a graded run (once it has waited its patience, or
// the run its grace); the graded run's sandbox then has the CPU first
// (session.Prioritizer). Before that, a right fix read 48-57 % of its baseline on both
// of its tries in four of eight full runs (ch08, ch11, ch17), and twice the patience
// and grace that avoided it cost the package 150 s.
var turns session.Turns

// The shipped scenario catalog, loaded once. Its cross-checks against the course and
// the fault kinds are `commlab content check`'s (cmd/commlab).
var catalog = sync.OnceValues(func() (*scenarios.Catalog, error) {
	cat, probs := scenarios.Load(scenarios.Embedded(), scenarios.CatalogDir, scenarios.Options{
		Topology: topology.BuiltinNodesAndNICs,
	})
	if len(probs) > 0 {
		return nil, probs
	}
	return cat, nil
})

func scenario(t *testing.T, id string) *scenarios.Scenario {
	t.Helper()
	cat, err := catalog()
	if err != nil {
		t.Fatalf("scenarios: %v", err)
	}
	sc, ok := cat.Get(id)
	if !ok {
		t.Fatalf("no scenario %s", id)
	}
	return sc
}

// Binary returns the commlab binary the labs run (ranks run "commlab bench rank";
// some learners run commlab in their shells): testenv.Commlab's, made once per test
// process.
func Binary(t *testing.T) string {
	t.Helper()
	return testenv.Commlab(t)
}

// SideBySide is how many labs play at once. Their time goes to waiting for the
// workload's next run (about one core while it runs, idle at least as long between
// runs) and for the learner's commands, so three fit on two cores. Four, tried while
// polls still ran without a turn, starved the labs that measure nothing of chart runs
// (ch12-nic-flap-timeout's log never showed its timeout) and gained nothing.
const SideBySide = 3

// Main runs a package's tests, then removes the binary Binary made. Packages that
// play labs call it from TestMain. Play admits labs to the host itself: go test's
// -parallel, unless given, is raised so that it never holds a lab back.
func Main(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", "1000"); err != nil {
			panic(err)
		}
	}
	testenv.Main(m)
}

// TypeAndWait types a command into a node's terminal and waits until its output is
// recorded (the shell's end-of-command marker).
func TypeAndWait(t *testing.T, l *session.Lab, node, line string) int {
	t.Helper()
	term, ok := l.Terminal(node)
	if !ok {
		t.Fatalf("no terminal on %s", node)
	}
	before, _ := term.Commands()
	if _, err := term.Write([]byte(line + "\n")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		cmds, _ := term.Commands()
		if len(cmds) > len(before) && cmds[len(cmds)-1].Exit >= 0 {
			return cmds[len(cmds)-1].Seq
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: %q did not finish", node, line)
	return 0
}

// Learner is a scripted learner in a running lab: it types into the nodes' terminals,
// reads back what they printed, and asks the grader about its work. Dry runs grade the
// transcripts as they are and leave the lab running; the real grading (Judge) ends it.
type Learner struct {
	T   *testing.T
	Lab *session.Lab
	// right is the diagnosis that must pass; the dry runs give it with other evidence.
	right Answer
	// estimates are the figures every answer reports (Verdicts.Estimates).
	estimates map[string]float64
}

// Answer is a diagnosis without its evidence: a fault class and where the fault is.
type Answer struct {
	Class string
	Loc   Loc
}

type (
	// Loc is a fault's location, as the learner names it (node, nic, port, gpu).
	Loc = map[string]string
	// Ref is a command the learner ran, cited by terminal and sequence number.
	Ref = grader.EvidenceRef
)

// FourNodes are the nodes of the four-node labs.
var FourNodes = []string{"node1", "node2", "node3", "node4"}

// OtherRail maps a node's data NIC to the one on the other rail.
var OtherRail = map[string]string{"rdma0": "rdma1", "rdma1": "rdma0"}

// Others returns the nodes of all except node, in order.
func Others(node string, all ...string) []string {
	var out []string
	for _, n := range all {
		if n != node {
			out = append(out, n)
		}
	}
	return out
}

func newLearner(t *testing.T, scenario string, seed uint64) *Learner {
	t.Helper()
	return &Learner{T: t, Lab: StartLab(t, scenario, seed)}
}

// V is one of the variant's drawn values.
func (lr *Learner) V(name string) string { return lr.Lab.Variant.Values[name] }

// Truth is the scenario's own answer for the drawn variant.
func (lr *Learner) Truth() Answer {
	return Answer{lr.Lab.Variant.Scenario.Diagnosis.Class, lr.Lab.Variant.Location()}
}

// Run types line into node's terminal and waits until the command has finished.
// A command that loads the host (loadsHost) takes a chart run's turn (session.Turns):
// it waits while a graded run has the host, and a graded run waits for it (at most the
// turns' Grace), so a learner's iperf3 or bench run in one lab never lowers another
// lab's graded figure. (A baseline taken beside a learner's iperf3 read half the
// healthy figure, and a fix that does not fix then passed its bar.) A command that
// only reads (grep, tc, ip, nft, a slow ping) runs at once, as a learner's would.
func (lr *Learner) Run(node, line string) Ref {
	lr.T.Helper()
	return lr.run(node, line, loadsHost(line))
}

// run is Run, taking a chart run's turn if turn is set.
func (lr *Learner) run(node, line string, turn bool) Ref {
	lr.T.Helper()
	if turn {
		release, err := turns.Chart(context.Background())
		if err != nil {
			lr.T.Fatal(err)
		}
		defer release()
	}
	return Ref{Terminal: node, Seq: TypeAndWait(lr.T, lr.Lab, node, line)}
}

// light are commands that read or set the lab's state without loading the host.
var light = map[string]bool{
	"awk": true, "base64": true, "cat": true, "cut": true, "echo": true, "ethtool": true,
	"grep": true, "head": true, "ip": true, "ls": true, "nft": true, "ping": true,
	"printf": true, "rm": true, "sort": true, "ss": true, "sysctl": true, "tail": true,
	"tc": true, "tr": true, "uniq": true, "wc": true,
}

// loadsHost reports whether a command line may load the host: unless every command
// of its pipelines and lists is light (a bare env, a ping not flooding, each
// perhaps under timeout), it may run a benchmark or traffic. A line it cannot read
// (a quote across the separators) counts as loading.
func loadsHost(line string) bool {
	for _, seg := range strings.FieldsFunc(strings.NewReplacer("&&", ";", "||", ";").Replace(line), func(r rune) bool { return r == '|' || r == ';' }) {
		w := strings.Fields(seg)
		if len(w) >= 2 && w[0] == "timeout" {
			w = w[2:]
		}
		switch {
		case len(w) == 0:
			continue
		case len(w) == 1 && w[0] == "env":
			continue
		case !light[w[0]] || w[0] == "ping" && slices.Contains(w, "-f"):
			return true
		}
	}
	return false
}

// Command is a command as its terminal's recording has it.
func (lr *Learner) Command(c Ref) record.Command {
	lr.T.Helper()
	cmds, err := MustTerminal(lr.T, lr.Lab, c.Terminal).Commands()
	if err != nil || c.Seq < 1 || c.Seq > len(cmds) {
		lr.T.Fatalf("%s#%d: not in the recording (%d commands, %v)", c.Terminal, c.Seq, len(cmds), err)
	}
	return cmds[c.Seq-1]
}

// Out is what a command printed.
func (lr *Learner) Out(c Ref) string {
	lr.T.Helper()
	return lr.Command(c).Output
}

// Expect runs a command whose output must contain want.
func (lr *Learner) Expect(node, line, want string) Ref {
	lr.T.Helper()
	c := lr.Run(node, line)
	out := lr.Out(c)
	lr.T.Logf("%s#%d %s:\n%s", node, c.Seq, line, out)
	if !strings.Contains(out, want) {
		lr.T.Errorf("%s: %q printed %q, want %q", node, line, out, want)
	}
	return c
}

// Poll runs line on node until shows holds for its output, retrying every apart:
// logs and counters show a fault only once the workload has run with it. It tries
// retries times what a lab playing by itself needs, twice that in all: the lab's
// chart runs, where the fault shows, wait while a lab beside it that measures the fix
// takes the host (session.Turns). Each try takes a chart run's turn, even a grep, so
// that the tries wait when the chart runs do: counted in free-running greps, the
// budget ran out in CI before ch12-nic-flap-timeout's held-back chart runs timed out.
// A command that never shows it is an error. It returns the last run.
func (lr *Learner) Poll(node, line string, retries int, every time.Duration, shows func(record.Command) bool) Ref {
	lr.T.Helper()
	retries *= 2
	for try := 0; ; try++ {
		c := lr.run(node, line, true)
		cmd := lr.Command(c)
		if shows(cmd) {
			lr.T.Logf("%s#%d %s:\n%s", node, c.Seq, line, cmd.Output)
			return c
		}
		if try == retries {
			lr.T.Errorf("%s: %q never showed what it should:\n%s", node, line, cmd.Output)
			return c
		}
		time.Sleep(every)
	}
}

// PollEvidence polls until the output shows one of the variant's evidence signals.
func (lr *Learner) PollEvidence(node, line string, retries int, every time.Duration) Ref {
	lr.T.Helper()
	return lr.Poll(node, line, retries, every, func(c record.Command) bool { return patternMatches(lr.T, lr.Lab, node, c) })
}

// printed is a poll condition: the output contains s.
func Printed(s string) func(record.Command) bool {
	return func(c record.Command) bool { return strings.Contains(c.Output, s) }
}

// Addr reads a node's IPv4 address on nic from its own shell.
func (lr *Learner) Addr(node, nic string) string {
	lr.T.Helper()
	c := lr.Run(node, "ip -4 -br addr show dev "+nic)
	m := regexp.MustCompile(`(\d+\.\d+\.\d+\.\d+)/\d+`).FindStringSubmatch(lr.Out(c))
	if m == nil {
		lr.T.Fatalf("%s: no IPv4 address on %s in %q", node, nic, lr.Out(c))
	}
	return m[1]
}

// Number reads the single number a command printed.
func (lr *Learner) Number(c Ref) int {
	lr.T.Helper()
	m := regexp.MustCompile(`(?m)^\s*(\d+)\s*$`).FindStringSubmatch(lr.Out(c))
	if m == nil {
		lr.T.Fatalf("%s#%d printed no number: %q", c.Terminal, c.Seq, lr.Out(c))
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// Dry grades a diagnosis over the transcripts as they are now, without ending the lab.
func (lr *Learner) Dry(a Answer, evidence Ref, m *grader.Measurement) grader.Result {
	lr.T.Helper()
	return lr.dry(a, []Ref{evidence}, m)
}

// DryCite is Dry citing several commands at once.
func (lr *Learner) DryCite(a Answer, evidence ...Ref) grader.Result {
	lr.T.Helper()
	return lr.dry(a, evidence, nil)
}

func (lr *Learner) dry(a Answer, evidence []Ref, m *grader.Measurement) grader.Result {
	lr.T.Helper()
	ts, err := lr.Lab.Transcripts()
	if err != nil {
		lr.T.Fatal(err)
	}
	d := grader.Diagnosis{Class: a.Class, Location: a.Loc, Evidence: evidence, Estimates: lr.estimates}
	r, err := grader.Grade(grader.Input{Variant: lr.Lab.Variant, Diagnosis: d, Transcripts: ts, Remediation: m})
	if err != nil {
		lr.T.Fatal(err)
	}
	return r
}

// assertEvidence: each output, cited alone with the right answer, earns evidence credit.
func (lr *Learner) assertEvidence(refs ...Ref) {
	lr.T.Helper()
	for _, c := range refs {
		if r := lr.Dry(lr.right, c, nil); Criterion(r, "evidence") == 0 {
			lr.T.Errorf("%s#%d %q earned no evidence credit: %+v", c.Terminal, c.Seq, lr.Command(c).Line, r)
		}
	}
}

// assertNoEvidence (b): each output, cited alone with the right answer, earns no
// evidence credit.
func (lr *Learner) assertNoEvidence(refs ...Ref) {
	lr.T.Helper()
	for _, c := range refs {
		if r := lr.Dry(lr.right, c, nil); Criterion(r, "evidence") != 0 {
			lr.T.Errorf("(b) %s#%d %q earned evidence credit: %+v", c.Terminal, c.Seq, lr.Command(c).Line, r)
		}
	}
}

// assertWrongFails (c): each wrong answer fails, even with real evidence.
func (lr *Learner) assertWrongFails(evidence Ref, wrong ...Answer) {
	lr.T.Helper()
	for _, a := range wrong {
		if r := lr.Dry(a, evidence, nil); r.Passed {
			lr.T.Errorf("(c) %s at %v passed: %+v", a.Class, a.Loc, r)
		}
	}
}

// assertWrongEstimatesFail (c): the right answer with wrong figures fails.
func (lr *Learner) assertWrongEstimatesFail(evidence Ref, wrong []map[string]float64) {
	lr.T.Helper()
	right := lr.estimates
	defer func() { lr.estimates = right }()
	for _, est := range wrong {
		lr.estimates = est
		if r := lr.Dry(lr.right, evidence, nil); r.Passed {
			lr.T.Errorf("(c) the figures %v passed: %+v", est, r)
		}
	}
}

// assertFixDoesNotFix (d): with a fix in place that does not fix, the lab's own answer
// check, which measures the workload again as grading does (the chart's run in flight
// gives way), earns no remediation credit. See checkNotFixed.
func (lr *Learner) assertFixDoesNotFix(evidence Ref) {
	lr.T.Helper()
	lr.checkNotFixed("(d) a fix that does not fix", grader.Diagnosis{Class: lr.right.Class, Location: lr.right.Loc, Evidence: []Ref{evidence}, Estimates: lr.estimates}, false)
}

// fixFails checks the lab's answer with the right diagnosis as it stands and wants no
// remediation credit and, with real evidence cited, no pass (the lab requires the
// bar): the setting in ~/job.env does not beat the start.
func (lr *Learner) fixFails(what string, evidence Ref) {
	lr.T.Helper()
	v := lr.Lab.Variant.Scenario.Diagnosis
	lr.checkNotFixed(what, grader.Diagnosis{Class: v.Class, Location: lr.Lab.Variant.Location(), Evidence: []Ref{evidence}}, true)
}

// checkNotFixed checks d with the lab's answer check and wants no remediation credit
// (and no pass if failToo). The check's run is cut at the time a run that shows a fix
// takes on a quiet host (session's NoFixAfter), not at the grading's margin for a busy
// one: a fix that does fix finishes well within it and earns its credit, failing the
// test, and each check costs seconds, not twice that and 5 s more.
func (lr *Learner) checkNotFixed(what string, d grader.Diagnosis, failToo bool) {
	lr.T.Helper()
	for wait := time.Now(); !lr.Lab.Status().Confirmed; time.Sleep(200 * time.Millisecond) {
		if time.Since(wait) > 3*time.Minute {
			lr.T.Fatalf("check after %s: the lab's self-test has not confirmed the fault in 3 minutes", what)
		}
	}
	noFix := lr.Lab.NoFixAfter() // 0 where nothing is re-measured (alerting rules)
	t0 := time.Now()
	r, err := lr.Lab.CheckWithin(context.Background(), d, noFix)
	if err != nil {
		lr.T.Fatalf("check after %s: %v", what, err)
	}
	lr.T.Logf("%s (%.1fs, cut at %s): %+v", what, time.Since(t0).Seconds(), noFix.Round(100*time.Millisecond), r)
	if Criterion(r, "remediation") != 0 || failToo && r.Passed {
		lr.T.Errorf("%s earned remediation credit or passed: %+v", what, r)
	}
}

// gradeForReal (a): the right answer with real evidence passes the lab's own grading,
// with evidence credit (all of it when several commands are cited together), and with
// remediation credit where the lab measures the fix. Grading ends the lab.
func (lr *Learner) gradeForReal(evidence ...Ref) grader.Result {
	lr.T.Helper()
	d := grader.Diagnosis{Class: lr.right.Class, Location: lr.right.Loc, Evidence: evidence, Estimates: lr.estimates}
	t0 := time.Now()
	res, err := lr.Lab.Grade(context.Background(), d)
	if err != nil {
		lr.T.Fatal(err)
	}
	lr.T.Logf("(a) graded in %.1fs: %+v", time.Since(t0).Seconds(), res)
	fixed := lr.Lab.Variant.Scenario.Remediation == nil || Criterion(res, "remediation") > 0
	if len(lr.Lab.Variant.Scenario.Estimates) > 0 && !full(res, "estimates") {
		lr.T.Errorf("(a) the learner's figures %v are not all within their tolerance: %+v", lr.estimates, res)
	}
	shown := Criterion(res, "evidence") > 0 && (len(evidence) == 1 || full(res, "evidence"))
	if !res.Passed || !shown || !fixed {
		lr.T.Errorf("(a) the right diagnosis with real evidence did not pass fully: %+v", res)
	}
	return res
}

// Verdicts is what the grader must make of a learner's work in one lab.
type Verdicts struct {
	Right Answer
	// Counts must earn evidence credit, each on its own. The first is the evidence cited
	// with the wrong answers and in the real grading.
	Counts []Ref
	// CountsNot must earn none: unrelated output, a healthy node's, faked output.
	CountsNot []Ref
	// Cite, if set, is cited together in the real grading instead of Counts[0], and must
	// earn the whole evidence credit (a check cited with its healthy nodes).
	Cite []Ref
	// WrongAt are wrong locations for the right class; WrongClass are neighbouring
	// classes (a nil location stands for the right one). All must fail.
	WrongAt    []Loc
	WrongClass []Answer
	// BadFix types a fix that does not fix, Fix the real one: both exactly where the lab
	// measures the remediation.
	BadFix, Fix func()
	// Estimates are the figures the learner worked out, reported with every answer, for a
	// lab that asks for them (scenarios.Estimate); the real grading needs them all right.
	// WrongEstimates are sets of figures with at least one wrong: each, with the right
	// answer and evidence, must fail.
	Estimates      map[string]float64
	WrongEstimates []map[string]float64
}

// Judge checks the verdicts in the order a learner meets them: dry runs first (evidence
// that counts, (b), (c), then (d) after the bad fix), then the real fix and the real
// grading (a).
func (lr *Learner) Judge(v Verdicts) grader.Result {
	lr.T.Helper()
	cls, _ := scenarios.ClassByID(v.Right.Class)
	if len(v.Counts) == 0 || len(v.CountsNot) == 0 || len(v.WrongAt) == 0 && len(cls.Where) > 0 {
		lr.T.Fatal("a lab test needs evidence that counts, output that does not and a wrong location (unless the class is located by nothing)")
	}
	if measured := lr.Lab.Variant.Scenario.Remediation != nil; measured != (v.BadFix != nil) || measured != (v.Fix != nil) {
		lr.T.Fatalf("a lab that measures the fix needs a fix and a fix that does not fix, and only such a lab (measured: %v)", measured)
	}
	if asked := len(lr.Lab.Variant.Scenario.Estimates) > 0; asked != (v.Estimates != nil) || asked != (len(v.WrongEstimates) > 0) {
		lr.T.Fatalf("a lab that asks for figures needs the learner's figures and wrong ones, and only such a lab (asks: %v)", asked)
	}
	lr.right, lr.estimates = v.Right, v.Estimates
	real := v.Counts[0]
	lr.assertEvidence(v.Counts...)
	lr.assertNoEvidence(v.CountsNot...)
	wrong := make([]Answer, 0, len(v.WrongAt)+len(v.WrongClass))
	for _, l := range v.WrongAt {
		wrong = append(wrong, Answer{v.Right.Class, l})
	}
	for _, a := range v.WrongClass {
		if a.Loc == nil {
			a.Loc = v.Right.Loc
		}
		wrong = append(wrong, a)
	}
	lr.assertWrongFails(real, wrong...)
	lr.assertWrongEstimatesFail(real, v.WrongEstimates)
	if v.BadFix != nil {
		v.BadFix()
		lr.assertFixDoesNotFix(real)
		v.Fix()
	}
	if len(v.Cite) > 0 {
		return lr.gradeForReal(v.Cite...)
	}
	return lr.gradeForReal(real)
}

// Option changes how a lab is played.
type Option int

// Alone runs a lab with no other lab beside it, for a story that compares speeds
// itself (bench runs typed in the shell, timings read from the chart's runs).
const Alone Option = 1

// Play starts a lab, lets story drive the learner and judges what it returns. Every
// lab is a parallel test; Play admits it to the host when it may run (see admit).
func Play(t *testing.T, scenario string, seed uint64, story func(*Learner) Verdicts, opts ...Option) {
	t.Helper()
	t.Parallel()
	defer admit(t, hostUse(t, scenario, opts))()
	lr := newLearner(t, scenario, seed)
	lr.Judge(story(lr))
}

// use is how a lab uses the host.
type use int

const (
	shares   use = iota // measures nothing another lab's load could spoil
	measures            // measures the learner's fix: its graded runs take the host (session.Turns)
	alone               // compares speeds in its story: the host to itself
)

// hostUse says how a lab uses the host. A lab measures when its remediation is
// measured on the workload (alerting rules are tested on recorded series, not timed).
func hostUse(t *testing.T, id string, opts []Option) use {
	switch r := scenario(t, id).Remediation; {
	case slices.Contains(opts, Alone):
		return alone
	case r != nil && r.Measure != scenarios.MeasureAlertRules:
		return measures
	}
	return shares
}

// host admits the labs: at most SideBySide at once, of which at most
// MeasuringSideBySide measure the fix (their graded runs take turns through
// session.Turns, and every turn holds the other labs' chart runs back, where their
// evidence comes from); a lab played alone by itself. See gate.
var host gate

// gate admits labs by how they use the host. Labs that measure the fix are the
// package's longest path (their graded runs take turns), so a free slot goes to one
// of them before a lab that measures nothing: a lab that measures nothing may take a
// slot only while enough stay free for the measuring labs that wait. A lab played
// alone waits until no other lab plays or waits, so the labs played alone come one
// after another once the others are done (or first, when one asks before any other),
// never each waiting for the host to empty while the others queue behind it. Go's
// RWMutex did the latter: every writer drained the host, its readers then filled it
// again.
type gate struct {
	mu               sync.Mutex
	cond             *sync.Cond
	playing, waiting [alone + 1]int // labs by use
}

// may reports whether a lab that uses the host as u may start now.
func (g *gate) may(u use) bool {
	in := g.playing[shares] + g.playing[measures]
	switch {
	case g.playing[alone] > 0:
		return false
	case u == alone:
		return in == 0 && g.waiting[shares]+g.waiting[measures] == 0
	case u == measures:
		return in < SideBySide && g.playing[measures] < MeasuringSideBySide
	}
	kept := min(g.waiting[measures], MeasuringSideBySide-g.playing[measures])
	return SideBySide-in > kept
}

// enter admits a lab that uses the host as u and returns the function that lets it out.
func (g *gate) enter(u use) (leave func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cond == nil {
		g.cond = sync.NewCond(&g.mu)
	}
	g.waiting[u]++
	for !g.may(u) {
		g.cond.Wait()
	}
	g.waiting[u]--
	g.playing[u]++
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.playing[u]--
		g.cond.Broadcast()
	}
}

// MeasuringSideBySide is how many labs that measure the fix play at once. Their
// graded runs take turns (session.Turns), so the time they gain is their stories',
// which wait on chart runs a graded turn holds back. With a check after a fix that
// does not fix cut at the quiet host's figure (checkNotFixed), two side by side took
// the package from 875 s to 697 s (load 5-9 from other work); with that check cut at
// the grading's margin, two gained only 887 s → 833 s.
const MeasuringSideBySide = 2

// admit waits until a lab that uses the host as u may start, and returns the function
// that lets the next one in.
func admit(t *testing.T, u use) (done func()) {
	t.Helper()
	if u != shares {
		waitQuiet(t)
	}
	return host.enter(u)
}

// QuietEnv names a file that appears once the host's other test packages are done
// (scripts/test.sh runs them beside this one). Labs that measure the fix, or compare
// speeds alone, wait for it: a baseline taken beside a browser test and Slurm's jobs
// read half the healthy figure, and ch11's fix that does not fix then passed its bar
// (the rate-capped run loses little to a busy CPU, the healthy one half). Labs that
// measure nothing play meanwhile.
const QuietEnv = "COMMLAB_TEST_QUIET_FILE"

// waitQuiet waits for QuietEnv's file, if one is named, at most 20 minutes.
func waitQuiet(t *testing.T) {
	t.Helper()
	path := os.Getenv(QuietEnv)
	if path == "" {
		return
	}
	start := time.Now()
	for {
		if _, err := os.Stat(path); err == nil {
			break
		}
		if time.Since(start) > 20*time.Minute {
			t.Logf("%s: %s did not appear in 20 minutes; playing anyway", QuietEnv, path)
			return
		}
		time.Sleep(time.Second)
	}
	if waited := time.Since(start); waited > time.Second {
		t.Logf("waited %.0fs for the host's other test packages to finish", waited.Seconds())
	}
}

// SeedsEnv chooses which of a lab's seeds PlaySeeds plays: the first by default
// (`make test`), every one when set to "all" (`make test-full`).
const SeedsEnv = "COMMLAB_E2E_SEEDS"

// PlaySeeds plays a lab once per chosen seed (see SeedsEnv), in subtests named seedN;
// the seeds left out are skipped, saying so.
func PlaySeeds(t *testing.T, scenario string, seeds []uint64, story func(*Learner) Verdicts, opts ...Option) {
	t.Helper()
	all, err := allSeeds(os.Getenv(SeedsEnv))
	if err != nil {
		t.Fatal(err)
	}
	t.Parallel()
	for i, seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			if i > 0 && !all {
				t.Skipf("one seed per lab unless %s=all (make test-full)", SeedsEnv)
			}
			Play(t, scenario, seed, story, opts...)
		})
	}
}

// allSeeds reads SeedsEnv's value: whether to play every seed.
func allSeeds(v string) (bool, error) {
	switch v {
	case "", "first":
		return false, nil
	case "all":
		return true, nil
	}
	return false, fmt.Errorf("%s=%q: want first or all", SeedsEnv, v)
}

// patternMatches reports whether a command shows one of the variant's evidence signals.
func patternMatches(t *testing.T, l *session.Lab, node string, c record.Command) bool {
	ps, err := l.Variant.Evidence()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if (p.Node == "" || p.Node == node) && p.Command.MatchString(c.Line) && p.Output.MatchString(c.Output) {
			return true
		}
	}
	return false
}

func MustTerminal(t *testing.T, l *session.Lab, node string) *session.Terminal {
	t.Helper()
	term, ok := l.Terminal(node)
	if !ok {
		t.Fatalf("no terminal on %s", node)
	}
	return term
}

// full reports whether a criterion earned its whole weight.
func full(r grader.Result, name string) bool {
	for _, c := range r.Criteria {
		if c.Name == name {
			return c.Earned >= c.Weight-1e-9
		}
	}
	return false
}

func Criterion(r grader.Result, name string) float64 {
	for _, c := range r.Criteria {
		if c.Name == name {
			return c.Earned
		}
	}
	return 0
}
