package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/grader"
	"github.com/commlab/commlab/injector"
	"github.com/commlab/commlab/labs/backend"
	"github.com/commlab/commlab/labs/record"
	"github.com/commlab/commlab/labs/session"

	"github.com/commlab/commlab/internal/testenv"
)

// labFixture starts a lab of a shipped scenario with a given seed, as root, on real
// namespaces, and tears it down when the test ends.
func labFixture(t *testing.T, id string, seed uint64) *session.Lab {
	t.Helper()
	testenv.RequireRoot(t, "lab sandboxes")
	ct, probs := loadContent("")
	if len(probs) > 0 {
		t.Fatalf("content: %v", probs)
	}
	sc, ok := ct.scenarios.Get(id)
	if !ok {
		t.Fatalf("no scenario %s", id)
	}
	data := t.TempDir()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	inj, err := backend.OpenInjector(injector.Options{DataDir: data, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	exe := buildSelf(t)
	l := session.Start(context.Background(), session.Config{
		Provider: backend.Local{DataDir: data, Exe: exe, Log: log},
		Faults:   backend.Faults{In: inj},
		DataDir:  data,
		TTL:      10 * time.Minute,
		Log:      log,
	}, 1, sc.Draw(seed))
	t.Cleanup(func() {
		l.Stop()
		l.Wait()
		if left, _ := inj.List(); len(left) > 0 {
			t.Errorf("faults left in the journal after the lab: %+v", left)
		}
	})
	deadline := time.Now().Add(4 * time.Minute)
	for {
		st := l.Status()
		if st.State == session.Ready {
			return l
		}
		if st.State == session.Failed || time.Now().After(deadline) {
			t.Fatalf("lab did not become ready: %+v", st)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// buildSelf builds the commlab binary once per test run: ranks run "commlab bench rank".
var selfBin string

// TestMain removes the binary buildSelf built (54 MB a run) once every test has run.
func TestMain(m *testing.M) {
	code := m.Run()
	if dir := filepath.Dir(selfBin); selfBin != "" && strings.HasPrefix(filepath.Base(dir), "commlab-bin-") {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

func buildSelf(t *testing.T) string {
	t.Helper()
	if selfBin != "" {
		return selfBin
	}
	dir, err := os.MkdirTemp("", "commlab-bin-")
	if err != nil {
		t.Fatal(err)
	}
	out := dir + "/commlab"
	buildInto(t, out)
	selfBin = out
	return out
}

// buildInto builds the commlab binary at out, or copies the one COMMLAB_TEST_BIN names
// (on a GPU machine without Go, the binary is built elsewhere and carried).
func buildInto(t *testing.T, out string) {
	t.Helper()
	if bin := os.Getenv("COMMLAB_TEST_BIN"); bin != "" {
		if b, err := runCmd("install", "-m", "0755", bin, out); err != nil {
			t.Fatalf("copy %s: %v\n%s", bin, err, b)
		}
		return
	}
	if b, err := runCmd("go", "build", "-o", out, "."); err != nil {
		t.Fatalf("build commlab: %v\n%s", err, b)
	}
}

// typeAndWait types a command into a node's terminal and waits until its output is
// recorded (the shell's end-of-command marker).
func typeAndWait(t *testing.T, l *session.Lab, node, line string) int {
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

// learner is a scripted learner in a running lab: it types into the nodes' terminals,
// reads back what they printed, and asks the grader about its work. Dry runs grade the
// transcripts as they are and leave the lab running; gradeForReal ends it.
type learner struct {
	t   *testing.T
	lab *session.Lab
	// right is the diagnosis that must pass; the dry runs give it with other evidence.
	right answer
}

// answer is a diagnosis without its evidence: a fault class and where the fault is.
type answer struct {
	class string
	loc   loc
}

type (
	// loc is a fault's location, as the learner names it (node, nic, port, gpu).
	loc = map[string]string
	// ref is a command the learner ran, cited by terminal and sequence number.
	ref = grader.EvidenceRef
)

// fourNodes are the nodes of the four-node labs.
var fourNodes = []string{"node1", "node2", "node3", "node4"}

// otherRail maps a node's data NIC to the one on the other rail.
var otherRail = map[string]string{"rdma0": "rdma1", "rdma1": "rdma0"}

// others returns the nodes of all except node, in order.
func others(node string, all ...string) []string {
	var out []string
	for _, n := range all {
		if n != node {
			out = append(out, n)
		}
	}
	return out
}

func newLearner(t *testing.T, scenario string, seed uint64) *learner {
	t.Helper()
	return &learner{t: t, lab: labFixture(t, scenario, seed)}
}

// v is one of the variant's drawn values.
func (lr *learner) v(name string) string { return lr.lab.Variant.Values[name] }

// truth is the scenario's own answer for the drawn variant.
func (lr *learner) truth() answer {
	return answer{lr.lab.Variant.Scenario.Diagnosis.Class, lr.lab.Variant.Location()}
}

// run types line into node's terminal and waits until the command has finished.
func (lr *learner) run(node, line string) ref {
	lr.t.Helper()
	return ref{Terminal: node, Seq: typeAndWait(lr.t, lr.lab, node, line)}
}

// command is a command as its terminal's recording has it.
func (lr *learner) command(c ref) record.Command {
	lr.t.Helper()
	cmds, err := mustTerm(lr.t, lr.lab, c.Terminal).Commands()
	if err != nil || c.Seq < 1 || c.Seq > len(cmds) {
		lr.t.Fatalf("%s#%d: not in the recording (%d commands, %v)", c.Terminal, c.Seq, len(cmds), err)
	}
	return cmds[c.Seq-1]
}

// out is what a command printed.
func (lr *learner) out(c ref) string {
	lr.t.Helper()
	return lr.command(c).Output
}

// expect runs a command whose output must contain want.
func (lr *learner) expect(node, line, want string) ref {
	lr.t.Helper()
	c := lr.run(node, line)
	out := lr.out(c)
	lr.t.Logf("%s#%d %s:\n%s", node, c.Seq, line, out)
	if !strings.Contains(out, want) {
		lr.t.Errorf("%s: %q printed %q, want %q", node, line, out, want)
	}
	return c
}

// poll runs line on node until shows holds for its output, retrying at most retries
// times, every apart: logs and counters show a fault only once the workload has run
// with it. A command that never shows it is an error. It returns the last run.
func (lr *learner) poll(node, line string, retries int, every time.Duration, shows func(record.Command) bool) ref {
	lr.t.Helper()
	for try := 0; ; try++ {
		c := lr.run(node, line)
		cmd := lr.command(c)
		if shows(cmd) {
			lr.t.Logf("%s#%d %s:\n%s", node, c.Seq, line, cmd.Output)
			return c
		}
		if try == retries {
			lr.t.Errorf("%s: %q never showed what it should:\n%s", node, line, cmd.Output)
			return c
		}
		time.Sleep(every)
	}
}

// pollEvidence polls until the output shows one of the variant's evidence signals.
func (lr *learner) pollEvidence(node, line string, retries int, every time.Duration) ref {
	lr.t.Helper()
	return lr.poll(node, line, retries, every, func(c record.Command) bool { return patternMatches(lr.t, lr.lab, node, c) })
}

// printed is a poll condition: the output contains s.
func printed(s string) func(record.Command) bool {
	return func(c record.Command) bool { return strings.Contains(c.Output, s) }
}

// addr reads a node's IPv4 address on nic from its own shell.
func (lr *learner) addr(node, nic string) string {
	lr.t.Helper()
	c := lr.run(node, "ip -4 -br addr show dev "+nic)
	m := regexp.MustCompile(`(\d+\.\d+\.\d+\.\d+)/\d+`).FindStringSubmatch(lr.out(c))
	if m == nil {
		lr.t.Fatalf("%s: no IPv4 address on %s in %q", node, nic, lr.out(c))
	}
	return m[1]
}

// number reads the single number a command printed.
func (lr *learner) number(c ref) int {
	lr.t.Helper()
	m := regexp.MustCompile(`(?m)^\s*(\d+)\s*$`).FindStringSubmatch(lr.out(c))
	if m == nil {
		lr.t.Fatalf("%s#%d printed no number: %q", c.Terminal, c.Seq, lr.out(c))
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// dry grades a diagnosis over the transcripts as they are now, without ending the lab.
func (lr *learner) dry(a answer, evidence ref, m *grader.Measurement) grader.Result {
	lr.t.Helper()
	ts, err := lr.lab.Transcripts()
	if err != nil {
		lr.t.Fatal(err)
	}
	d := grader.Diagnosis{Class: a.class, Location: a.loc, Evidence: []ref{evidence}}
	r, err := grader.Grade(grader.Input{Variant: lr.lab.Variant, Diagnosis: d, Transcripts: ts, Remediation: m})
	if err != nil {
		lr.t.Fatal(err)
	}
	return r
}

// assertEvidence: each output, cited alone with the right answer, earns evidence credit.
func (lr *learner) assertEvidence(refs ...ref) {
	lr.t.Helper()
	for _, c := range refs {
		if r := lr.dry(lr.right, c, nil); criterion(r, "evidence") == 0 {
			lr.t.Errorf("%s#%d %q earned no evidence credit: %+v", c.Terminal, c.Seq, lr.command(c).Line, r)
		}
	}
}

// assertNoEvidence (b): each output, cited alone with the right answer, earns no
// evidence credit.
func (lr *learner) assertNoEvidence(refs ...ref) {
	lr.t.Helper()
	for _, c := range refs {
		if r := lr.dry(lr.right, c, nil); criterion(r, "evidence") != 0 {
			lr.t.Errorf("(b) %s#%d %q earned evidence credit: %+v", c.Terminal, c.Seq, lr.command(c).Line, r)
		}
	}
}

// assertWrongFails (c): each wrong answer fails, even with real evidence.
func (lr *learner) assertWrongFails(evidence ref, wrong ...answer) {
	lr.t.Helper()
	for _, a := range wrong {
		if r := lr.dry(a, evidence, nil); r.Passed {
			lr.t.Errorf("(c) %s at %v passed: %+v", a.class, a.loc, r)
		}
	}
}

// assertFixDoesNotFix (d): with a fix in place that does not fix, the workload measured
// again earns no remediation credit.
func (lr *learner) assertFixDoesNotFix(evidence ref) {
	lr.t.Helper()
	bw, err := lr.lab.Measure(context.Background())
	lr.t.Logf("after a fix that does not fix: %.4f GB/s (%v), baseline %.4f", bw, err, lr.lab.Baseline())
	if r := lr.dry(lr.right, evidence, &grader.Measurement{Baseline: lr.lab.Baseline(), After: bw}); criterion(r, "remediation") != 0 {
		lr.t.Errorf("(d) a fix that does not fix earned remediation credit: %+v", r)
	}
}

// gradeForReal (a): the right answer with real evidence passes the lab's own grading,
// with evidence credit, and with remediation credit where the lab measures the fix.
// Grading ends the lab.
func (lr *learner) gradeForReal(evidence ref) grader.Result {
	lr.t.Helper()
	d := grader.Diagnosis{Class: lr.right.class, Location: lr.right.loc, Evidence: []ref{evidence}}
	res, err := lr.lab.Grade(context.Background(), d)
	if err != nil {
		lr.t.Fatal(err)
	}
	lr.t.Logf("(a) %+v", res)
	fixed := lr.lab.Variant.Scenario.Remediation == nil || criterion(res, "remediation") > 0
	if !res.Passed || criterion(res, "evidence") == 0 || !fixed {
		lr.t.Errorf("(a) the right diagnosis with real evidence did not pass fully: %+v", res)
	}
	return res
}

// verdicts is what the grader must make of a learner's work in one lab.
type verdicts struct {
	right answer
	// counts must earn evidence credit, each on its own. The first is the evidence cited
	// with the wrong answers and in the real grading.
	counts []ref
	// countsNot must earn none: unrelated output, a healthy node's, faked output.
	countsNot []ref
	// wrongAt are wrong locations for the right class; wrongClass are neighbouring
	// classes (a nil location stands for the right one). All must fail.
	wrongAt    []loc
	wrongClass []answer
	// badFix types a fix that does not fix, fix the real one: both exactly where the lab
	// measures the remediation.
	badFix, fix func()
}

// judge checks the verdicts in the order a learner meets them: dry runs first (evidence
// that counts, (b), (c), then (d) after the bad fix), then the real fix and the real
// grading (a).
func (lr *learner) judge(v verdicts) grader.Result {
	lr.t.Helper()
	if len(v.counts) == 0 || len(v.countsNot) == 0 || len(v.wrongAt) == 0 {
		lr.t.Fatal("a lab test needs evidence that counts, output that does not and a wrong location")
	}
	if measured := lr.lab.Variant.Scenario.Remediation != nil; measured != (v.badFix != nil) || measured != (v.fix != nil) {
		lr.t.Fatalf("a lab that measures the fix needs a fix and a fix that does not fix, and only such a lab (measured: %v)", measured)
	}
	lr.right = v.right
	real := v.counts[0]
	lr.assertEvidence(v.counts...)
	lr.assertNoEvidence(v.countsNot...)
	wrong := make([]answer, 0, len(v.wrongAt)+len(v.wrongClass))
	for _, l := range v.wrongAt {
		wrong = append(wrong, answer{v.right.class, l})
	}
	for _, a := range v.wrongClass {
		if a.loc == nil {
			a.loc = v.right.loc
		}
		wrong = append(wrong, a)
	}
	lr.assertWrongFails(real, wrong...)
	if v.badFix != nil {
		v.badFix()
		lr.assertFixDoesNotFix(real)
		v.fix()
	}
	return lr.gradeForReal(real)
}

// playLab starts a lab, lets story drive the learner and judges what it returns.
func playLab(t *testing.T, scenario string, seed uint64, story func(*learner) verdicts) {
	t.Helper()
	lr := newLearner(t, scenario, seed)
	lr.judge(story(lr))
}

// playSeeds plays a lab once per seed, in subtests named seedN.
func playSeeds(t *testing.T, scenario string, seeds []uint64, story func(*learner) verdicts) {
	t.Helper()
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { playLab(t, scenario, seed, story) })
	}
}

// TestLabRailThrottled: one node's rdma0 is shaped far below the rail's rate. The
// learner reads both nodes' qdiscs, echoes the expected line on the healthy node (fake
// evidence), and puts the shaper back to the rail's plan.
func TestLabRailThrottled(t *testing.T) {
	playLab(t, "ch08-rail-throttled", 3, func(lr *learner) verdicts {
		node := lr.v("node")
		other := others(node, "node1", "node2")[0]
		qdisc := lr.run(node, "tc -s qdisc show dev rdma0")
		lr.t.Logf("evidence output: %s", lr.out(qdisc))
		healthy := lr.run(other, "tc -s qdisc show dev rdma0")
		fake := lr.run(other, "echo 'qdisc tbf c1: root refcnt 2 rate "+lr.v("rate")+"Mbit burst 1b lat 1ms'")
		planned := "tc qdisc replace dev rdma0 root handle c1: tbf rate 200mbit burst 250kb latency 25ms"
		return verdicts{
			right:  answer{"nic-rate-limited", loc{"node": node, "nic": "rdma0"}},
			counts: []ref{qdisc},
			// Echoed evidence and the healthy node's qdisc earn nothing.
			countsNot: []ref{fake, healthy},
			wrongAt:   []loc{{"node": other, "nic": "rdma0"}},
			// The plan's shaper on the healthy node changes nothing; on the node, it fixes.
			badFix: func() { lr.run(other, planned) },
			fix:    func() { lr.run(node, planned) },
		}
	})
}

// TestLabs runs the namespace scenarios whose story is one command with a scripted
// learner: the evidence command in a real shell (polled until it shows the fault), an
// unrelated command, then the four checks of judge.
func TestLabs(t *testing.T) {
	other := func(n string, all ...string) string { return others(n, all...)[0] }
	type command func(v map[string]string) (node, line string)
	tests := []struct {
		id       string
		seed     uint64
		evidence command
		wrong    func(v map[string]string) loc
		badFix   command
		fix      command
		// sees is another command whose output must show the fault to the learner.
		sees func(v map[string]string) (node, line, want string)
	}{
		{
			id: "ch08-switch-congestion", seed: 5,
			evidence: func(v map[string]string) (string, string) { return v["victim"], "ss -tn" },
			wrong:    func(v map[string]string) loc { return loc{"port": other(v["victim"], "node1", "node2")} },
		},
		{
			id: "ch08-link-loss", seed: 7,
			evidence: func(v map[string]string) (string, string) { return v["node"], "nft list ruleset" },
			wrong: func(v map[string]string) loc {
				return loc{"node": other(v["node"], "node1", "node2", "node3"), "nic": "rdma0"}
			},
			badFix: func(v map[string]string) (string, string) {
				return other(v["node"], "node1", "node2"), "tc qdisc show dev rdma0"
			},
			fix: func(v map[string]string) (string, string) { return v["node"], "nft flush ruleset" },
		},
		{
			id: "ch09-roce-retry-exceeded", seed: 11,
			evidence: func(v map[string]string) (string, string) { return "node1", "grep 'Got completion' train.log" },
			wrong: func(v map[string]string) loc {
				return loc{"node": other(v["node"], "node1", "node2"), "nic": "rdma0"}
			},
			badFix: func(v map[string]string) (string, string) {
				return other(v["node"], "node1", "node2"), "nft flush ruleset"
			},
			fix: func(v map[string]string) (string, string) { return v["node"], "nft flush ruleset" },
		},
		{
			id: "ch17-straggler-cpu", seed: 17,
			evidence: func(v map[string]string) (string, string) { return v["node"], "cat /sys/fs/cgroup/cpu/cpu.stat" },
			wrong:    func(v map[string]string) loc { return loc{"node": other(v["node"], "node1", "node2")} },
			sees: func(v map[string]string) (string, string, string) {
				cpus, _ := strconv.ParseFloat(v["cpus"], 64)
				return v["node"], "cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us", strconv.Itoa(int(cpus*100000 + 0.5))
			},
		},
		{
			id: "ch07-wrong-interface", seed: 13,
			evidence: func(v map[string]string) (string, string) { return "node1", "grep 'NET/Socket : Using' train.log" },
			sees: func(v map[string]string) (string, string, string) {
				return v["node"], "env | grep NCCL_SOCKET_IFNAME; cat /etc/profile.d/nccl.sh", "export NCCL_SOCKET_IFNAME=eth0"
			},
			wrong: func(v map[string]string) loc { return loc{"node": other(v["node"], "node1", "node2")} },
		},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			playLab(t, tt.id, tt.seed, func(lr *learner) verdicts {
				v := lr.lab.Variant.Values
				node, line := tt.evidence(v)
				real := lr.pollEvidence(node, line, 20, 3*time.Second)
				if tt.sees != nil {
					lr.expect(tt.sees(v))
				}
				vd := verdicts{
					right:     lr.truth(),
					counts:    []ref{real},
					countsNot: []ref{lr.run(node, "ip -br link")},
					wrongAt:   []loc{tt.wrong(v)},
				}
				if tt.badFix != nil {
					vd.badFix = func() { lr.run(tt.badFix(v)) }
				}
				if tt.fix != nil {
					vd.fix = func() { lr.run(tt.fix(v)) }
				}
				return vd
			})
		})
	}
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

func mustTerm(t *testing.T, l *session.Lab, node string) *session.Terminal {
	t.Helper()
	term, ok := l.Terminal(node)
	if !ok {
		t.Fatalf("no terminal on %s", node)
	}
	return term
}

func criterion(r grader.Result, name string) float64 {
	for _, c := range r.Criteria {
		if c.Name == name {
			return c.Earned
		}
	}
	return 0
}

// shellVisibleBin makes the lab's commlab binary one a learner shell can run. Labs put
// the binary's directory on the shell's PATH, but buildSelf builds into a private
// directory under /tmp, which a learner shell does not see (its /tmp is the sandbox's
// own). Labs that have the learner run `commlab bench` build it once into a directory
// outside /tmp, readable by everyone, and remove it when the test ends.
func shellVisibleBin(t *testing.T) {
	t.Helper()
	testenv.RequireRoot(t, "lab sandboxes")
	if selfBin != "" && !strings.HasPrefix(selfBin, os.TempDir()) {
		return
	}
	dir, err := os.MkdirTemp("/var/lib", "commlab-labtest-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "commlab")
	t.Cleanup(func() { os.RemoveAll(dir) })
	buildInto(t, out)
	prev := selfBin
	selfBin = out
	t.Cleanup(func() { selfBin = prev })
}
