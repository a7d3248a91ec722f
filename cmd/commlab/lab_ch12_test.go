package main

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/grader"
	"github.com/commlab/commlab/labs/session"
)

// TestLabCh12NICFlapTimeout runs chapter 12's lab with a scripted learner: one node's
// data NIC flaps (24 s down, 6 s up), so the TCP job times out in collectives and at
// connection setup. The learner reads the timeouts in train.log, then finds the node
// whose link keeps changing state (ip link, ip monitor, carrier_changes). The lab has no
// remediation: the learner cannot stop the flapping.
func TestLabCh12NICFlapTimeout(t *testing.T) {
	// Seed 1: node3's rdma0 (the first interface NCCL_SOCKET_IFNAME=rdma matches);
	// seed 9: node2's rdma1.
	for _, seed := range []uint64{1, 9} {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { ch12NICFlap(t, seed) })
	}
}

func ch12NICFlap(t *testing.T, seed uint64) {
	l := labFixture(t, "ch12-nic-flap-timeout", seed)
	v := l.Variant.Values
	node, nic := v["node"], v["nic"]
	other := "node1"
	if node == "node1" {
		other = "node4"
	}
	t.Logf("variant: node=%s nic=%s", node, nic)

	// The job's log: poll until a faulted run has timed out.
	line := "grep -e watchdog -e within -e unreachable train.log"
	logSeq := ch12Poll(t, l, other, line, 30)

	// The link state on the faulty node: down most of the time, so a few tries suffice.
	linkSeq := ch12Poll(t, l, node, "ip -br link", 20)
	cc := "cat /sys/class/net/" + nic + "/carrier_changes"
	ccSeq := typeAndWait(t, l, node, cc)
	ccHealthy := typeAndWait(t, l, other, cc)
	if n := ch12Number(t, l, node, ccSeq); n < 3 {
		t.Errorf("%s: carrier_changes of %s is %d, want >= 3", node, nic, n)
	}
	if n := ch12Number(t, l, other, ccHealthy); n != 2 {
		t.Logf("%s: carrier_changes of the healthy %s is %d (2 expected)", other, nic, n)
	}
	// Watching the link for longer than a period shows both states.
	monSeq := typeAndWait(t, l, node, "timeout 35 ip monitor link")
	mon, _ := mustTerm(t, l, node).Commands()
	out := mon[monSeq-1].Output
	t.Logf("%s: ip monitor link:\n%s", node, out)
	if !strings.Contains(out, nic) || !strings.Contains(out, "state DOWN") || !strings.Contains(out, "state UP") {
		t.Errorf("%s: ip monitor link did not show %s going down and up:\n%s", node, nic, out)
	}
	healthyLink := typeAndWait(t, l, other, "ip -br link")
	decoy := typeAndWait(t, l, node, "ip -br addr show dev eth0")

	ts, err := l.Transcripts()
	if err != nil {
		t.Fatal(err)
	}
	dry := func(d grader.Diagnosis) grader.Result {
		r, err := grader.Grade(grader.Input{Variant: l.Variant, Diagnosis: d, Transcripts: ts})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	class := "nic-flapping"
	loc := map[string]string{"node": node, "nic": nic}
	for _, ref := range []grader.EvidenceRef{{Terminal: other, Seq: logSeq}, {Terminal: node, Seq: linkSeq}, {Terminal: node, Seq: ccSeq}, {Terminal: node, Seq: monSeq}} {
		if r := dry(grader.Diagnosis{Class: class, Location: loc, Evidence: []grader.EvidenceRef{ref}}); criterion(r, "evidence") == 0 {
			t.Errorf("%s#%d earned no evidence credit: %+v", ref.Terminal, ref.Seq, r)
		}
	}
	// (b) unrelated output, and a healthy node's link state and counter, earn nothing.
	for _, ref := range []grader.EvidenceRef{{Terminal: node, Seq: decoy}, {Terminal: other, Seq: healthyLink}, {Terminal: other, Seq: ccHealthy}} {
		if r := dry(grader.Diagnosis{Class: class, Location: loc, Evidence: []grader.EvidenceRef{ref}}); criterion(r, "evidence") != 0 {
			t.Errorf("(b) %s#%d earned evidence credit: %+v", ref.Terminal, ref.Seq, r)
		}
	}
	// (c) the wrong node, the wrong NIC, or "down" instead of "flapping" fails.
	real := []grader.EvidenceRef{{Terminal: node, Seq: ccSeq}}
	otherNIC := map[string]string{"rdma0": "rdma1", "rdma1": "rdma0"}[nic]
	for _, wrong := range []map[string]string{{"node": other, "nic": nic}, {"node": node, "nic": otherNIC}} {
		if r := dry(grader.Diagnosis{Class: class, Location: wrong, Evidence: real}); r.Passed {
			t.Errorf("(c) the wrong location %v passed: %+v", wrong, r)
		}
	}
	if r := dry(grader.Diagnosis{Class: "nic-down", Location: loc, Evidence: real}); r.Passed {
		t.Errorf("(c) the neighbouring class nic-down passed: %+v", r)
	}
	// (a) the right diagnosis with real evidence passes.
	res, err := l.Grade(context.Background(), grader.Diagnosis{Class: class, Location: loc, Evidence: real})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("(a) %+v", res)
	if !res.Passed || criterion(res, "evidence") == 0 {
		t.Errorf("(a) the right diagnosis with real evidence did not pass: %+v", res)
	}
}

// ch12Poll types line into node's shell until its output shows one of the variant's
// evidence signals, at most tries times, 2 s apart; it returns the last command's seq.
func ch12Poll(t *testing.T, l *session.Lab, node, line string, tries int) int {
	t.Helper()
	var seq int
	for try := 0; ; try++ {
		seq = typeAndWait(t, l, node, line)
		cmds, _ := mustTerm(t, l, node).Commands()
		if patternMatches(t, l, node, cmds[seq-1]) {
			t.Logf("%s#%d %s:\n%s", node, seq, line, cmds[seq-1].Output)
			return seq
		}
		if try == tries {
			t.Errorf("%s: %q never showed the fault:\n%s", node, line, cmds[seq-1].Output)
			return seq
		}
		time.Sleep(2 * time.Second)
	}
}

// ch12Number reads the single number a command printed.
func ch12Number(t *testing.T, l *session.Lab, node string, seq int) int {
	t.Helper()
	cmds, _ := mustTerm(t, l, node).Commands()
	m := regexp.MustCompile(`(?m)^\s*(\d+)\s*$`).FindStringSubmatch(cmds[seq-1].Output)
	if m == nil {
		t.Fatalf("%s#%d printed no number: %q", node, seq, cmds[seq-1].Output)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}
