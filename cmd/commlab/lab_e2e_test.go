package main

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/grader"
	"github.com/commlab/commlab/injector"
	"github.com/commlab/commlab/labs/backend"
	"github.com/commlab/commlab/labs/record"
	"github.com/commlab/commlab/labs/session"
)

// labFixture starts a lab of a shipped scenario with a given seed, as root, on real
// namespaces, and tears it down when the test ends.
func labFixture(t *testing.T, id string, seed uint64) *session.Lab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("labs need root")
	}
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

func TestLabRailThrottled(t *testing.T) {
	l := labFixture(t, "ch08-rail-throttled", 3)
	node := l.Variant.Values["node"]
	other := map[string]string{"node1": "node2", "node2": "node1"}[node]
	seq := typeAndWait(t, l, node, "tc -s qdisc show dev rdma0")
	otherSeq := typeAndWait(t, l, other, "tc -s qdisc show dev rdma0")
	fake := typeAndWait(t, l, other, "echo 'qdisc tbf c1: root refcnt 2 rate "+l.Variant.Values["rate"]+"Mbit burst 1b lat 1ms'")
	cmds, _ := mustTerm(t, l, node).Commands()
	t.Logf("evidence output: %s", cmds[seq-1].Output)

	// (b) the right answer with fake evidence gets no evidence credit, graded in a dry run
	ts, err := l.Transcripts()
	if err != nil {
		t.Fatal(err)
	}
	right := map[string]string{"node": node, "nic": "rdma0"}
	dry := func(d grader.Diagnosis) grader.Result {
		r, err := grader.Grade(grader.Input{Variant: l.Variant, Diagnosis: d, Transcripts: ts})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := dry(grader.Diagnosis{Class: "nic-rate-limited", Location: right, Evidence: []grader.EvidenceRef{{Terminal: other, Seq: fake}}}); criterion(r, "evidence") != 0 {
		t.Errorf("echoed evidence earned credit: %+v", r)
	}
	if r := dry(grader.Diagnosis{Class: "nic-rate-limited", Location: right, Evidence: []grader.EvidenceRef{{Terminal: other, Seq: otherSeq}}}); criterion(r, "evidence") != 0 {
		t.Errorf("the healthy node's qdisc earned evidence credit: %+v", r)
	}
	// (c) the wrong location fails
	if r := dry(grader.Diagnosis{Class: "nic-rate-limited", Location: map[string]string{"node": other, "nic": "rdma0"}, Evidence: []grader.EvidenceRef{{Terminal: node, Seq: seq}}}); r.Passed {
		t.Errorf("wrong node passed: %+v", r)
	}
	// (a) right diagnosis, real evidence and a real fix: pass, measured again.
	typeAndWait(t, l, node, "tc qdisc replace dev rdma0 root handle c1: tbf rate 200mbit burst 250kb latency 25ms")
	res, err := l.Grade(context.Background(), grader.Diagnosis{Class: "nic-rate-limited", Location: right, Evidence: []grader.EvidenceRef{{Terminal: node, Seq: seq}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("result: %+v", res)
	if !res.Passed || criterion(res, "remediation") == 0 || criterion(res, "evidence") == 0 {
		t.Errorf("right diagnosis with a fix did not pass fully: %+v", res)
	}
}

// TestLabs runs every namespace scenario that has no dedicated test with a scripted
// learner: the evidence command in a real shell, then (b) right answer with evidence
// from the wrong command gets no evidence credit, (c) the wrong location fails, (d) a
// fix that does not fix fails the remediation, and (a) the right answer with real
// evidence (and a real fix where the lab asks for one) passes.
func TestLabs(t *testing.T) {
	other := func(n string, all ...string) string {
		for _, x := range all {
			if x != n {
				return x
			}
		}
		return ""
	}
	tests := []struct {
		id       string
		seed     uint64
		evidence func(v map[string]string) (node, line string)
		wrong    func(v map[string]string) map[string]string
		badFix   func(v map[string]string) (node, line string)
		fix      func(v map[string]string) (node, line string)
		// sees is another command whose output must show the fault to the learner.
		sees func(v map[string]string) (node, line, want string)
	}{
		{
			id: "ch08-switch-congestion", seed: 5,
			evidence: func(v map[string]string) (string, string) { return v["victim"], "ss -tn" },
			wrong: func(v map[string]string) map[string]string {
				return map[string]string{"port": other(v["victim"], "node1", "node2")}
			},
		},
		{
			id: "ch08-link-loss", seed: 7,
			evidence: func(v map[string]string) (string, string) { return v["node"], "nft list ruleset" },
			wrong: func(v map[string]string) map[string]string {
				return map[string]string{"node": other(v["node"], "node1", "node2", "node3"), "nic": "rdma0"}
			},
			badFix: func(v map[string]string) (string, string) {
				return other(v["node"], "node1", "node2"), "tc qdisc show dev rdma0"
			},
			fix: func(v map[string]string) (string, string) { return v["node"], "nft flush ruleset" },
		},
		{
			id: "ch09-roce-retry-exceeded", seed: 11,
			evidence: func(v map[string]string) (string, string) { return "node1", "grep 'error 12' train.log" },
			wrong: func(v map[string]string) map[string]string {
				return map[string]string{"node": other(v["node"], "node1", "node2"), "nic": "rdma0"}
			},
			badFix: func(v map[string]string) (string, string) {
				return other(v["node"], "node1", "node2"), "nft flush ruleset"
			},
			fix: func(v map[string]string) (string, string) { return v["node"], "nft flush ruleset" },
		},
		{
			id: "ch17-straggler-cpu", seed: 17,
			evidence: func(v map[string]string) (string, string) { return v["node"], "cat /sys/fs/cgroup/cpu/cpu.stat" },
			wrong: func(v map[string]string) map[string]string {
				return map[string]string{"node": other(v["node"], "node1", "node2")}
			},
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
			wrong: func(v map[string]string) map[string]string {
				return map[string]string{"node": other(v["node"], "node1", "node2")}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			l := labFixture(t, tt.id, tt.seed)
			v := l.Variant.Values
			sc := l.Variant.Scenario
			node, line := tt.evidence(v)
			var seq int
			// Logs appear once the workload has run with the fault: poll for the signal.
			for try := 0; ; try++ {
				seq = typeAndWait(t, l, node, line)
				cmds, _ := mustTerm(t, l, node).Commands()
				if patternMatches(t, l, node, cmds[seq-1]) || try == 20 {
					t.Logf("%s#%d %s:\n%s", node, seq, line, cmds[seq-1].Output)
					break
				}
				time.Sleep(3 * time.Second)
			}
			if tt.sees != nil {
				n, line, want := tt.sees(v)
				seq := typeAndWait(t, l, n, line)
				all, _ := mustTerm(t, l, n).Commands()
				c := all[seq-1]
				if !strings.Contains(c.Output, want) {
					t.Errorf("%s: %q printed %q, want %q", n, line, c.Output, want)
				}
			}
			decoy := typeAndWait(t, l, node, "ip -br link")
			ts, err := l.Transcripts()
			if err != nil {
				t.Fatal(err)
			}
			dry := func(d grader.Diagnosis, m *grader.Measurement) grader.Result {
				r, err := grader.Grade(grader.Input{Variant: l.Variant, Diagnosis: d, Transcripts: ts, Remediation: m})
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			loc := l.Variant.Location()
			class := sc.Diagnosis.Class
			real := []grader.EvidenceRef{{Terminal: node, Seq: seq}}
			if r := dry(grader.Diagnosis{Class: class, Location: loc, Evidence: []grader.EvidenceRef{{Terminal: node, Seq: decoy}}}, nil); criterion(r, "evidence") != 0 {
				t.Errorf("(b) unrelated output earned evidence credit: %+v", r)
			}
			if r := dry(grader.Diagnosis{Class: class, Location: tt.wrong(v), Evidence: real}, nil); r.Passed {
				t.Errorf("(c) the wrong location passed: %+v", r)
			}
			if tt.badFix != nil {
				n, cmd := tt.badFix(v)
				typeAndWait(t, l, n, cmd)
				bw, err := l.Measure(context.Background())
				t.Logf("after a fix that does not fix: %.4f GB/s (%v), baseline %.4f", bw, err, l.Baseline())
				r := dry(grader.Diagnosis{Class: class, Location: loc, Evidence: real}, &grader.Measurement{Baseline: l.Baseline(), After: bw})
				if criterion(r, "remediation") != 0 {
					t.Errorf("(d) a fix that does not fix earned remediation credit: %+v", r)
				}
			}
			if tt.fix != nil {
				n, cmd := tt.fix(v)
				typeAndWait(t, l, n, cmd)
			}
			res, err := l.Grade(context.Background(), grader.Diagnosis{Class: class, Location: loc, Evidence: real})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("(a) %+v", res)
			if !res.Passed || criterion(res, "evidence") == 0 || (sc.Remediation != nil && criterion(res, "remediation") == 0) {
				t.Errorf("(a) the right diagnosis with real evidence did not pass fully: %+v", res)
			}
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
