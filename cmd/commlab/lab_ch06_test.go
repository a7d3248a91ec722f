package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/grader"
	"github.com/commlab/commlab/labs/session"
)

// TestLabCh06BootstrapBlocked runs chapter 6's lab with a scripted learner: one node's
// firewall drops inbound TCP to unprivileged ports, so NCCL's bootstrap never completes.
// The learner finds the failing rank in train.log, sees that ICMP works and TCP does
// not, reads the nftables rule, and removes it.
func TestLabCh06BootstrapBlocked(t *testing.T) {
	// Seed 2 blocks node1, the bootstrap root (every other rank is missing); seed 1 blocks
	// node3 (one rank is missing).
	for _, seed := range []uint64{2, 1} {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { ch06BootstrapBlocked(t, seed) })
	}
}

func ch06BootstrapBlocked(t *testing.T, seed uint64) {
	{
		l := labFixture(t, "ch06-bootstrap-blocked", seed)
		v := l.Variant.Values
		node := v["node"]
		t.Logf("variant: node=%s", node)
		// peer: a node to probe from the faulty one; other: a healthy node that is not peer.
		peer := "node1"
		if node == "node1" {
			peer = "node2"
		}
		var other string
		for _, n := range []string{"node1", "node2", "node3", "node4"} {
			if n != node && n != peer {
				other = n
				break
			}
		}

		// The log shows the failing rank: poll until a faulted run has written it.
		line := "grep 'Test NCCL failure' train.log"
		var seq int
		for try := 0; ; try++ {
			seq = typeAndWait(t, l, "node1", line)
			cmds, _ := mustTerm(t, l, "node1").Commands()
			if patternMatches(t, l, "node1", cmds[seq-1]) || try == 20 {
				t.Logf("node1#%d %s:\n%s", seq, line, cmds[seq-1].Output)
				break
			}
			time.Sleep(3 * time.Second)
		}

		// Bisect by layer on the node: ICMP gets through, TCP does not, and the ruleset says why.
		peerIP := ch06NodeAddr(t, l, peer, "eth0")
		seen := func(n, cmd, want string) int {
			s := typeAndWait(t, l, n, cmd)
			cmds, _ := mustTerm(t, l, n).Commands()
			if !strings.Contains(cmds[s-1].Output, want) {
				t.Errorf("%s: %q printed %q, want %q", n, cmd, cmds[s-1].Output, want)
			}
			return s
		}
		seen(node, "ping -c 3 -i 0.2 -W 1 "+peerIP, " 0% packet loss")
		probe := "timeout 3 bash -c 'echo > /dev/tcp/" + peerIP + "/29500'; echo rc=$?"
		seen(node, probe, "rc=124")
		seen(other, probe, "Connection refused")
		nftSeq := seen(node, "nft list ruleset", "tcp dport 1024-65535")
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
		class := "bootstrap-port-blocked"
		loc := map[string]string{"node": node}
		real := []grader.EvidenceRef{{Terminal: "node1", Seq: seq}}
		if r := dry(grader.Diagnosis{Class: class, Location: loc, Evidence: real}, nil); criterion(r, "evidence") == 0 {
			t.Errorf("the log lines of the failing rank earned no evidence credit: %+v", r)
		}
		if r := dry(grader.Diagnosis{Class: class, Location: loc, Evidence: []grader.EvidenceRef{{Terminal: node, Seq: nftSeq}}}, nil); criterion(r, "evidence") == 0 {
			t.Errorf("the nftables rule earned no evidence credit: %+v", r)
		}
		// (b) an unrelated command earns nothing.
		if r := dry(grader.Diagnosis{Class: class, Location: loc, Evidence: []grader.EvidenceRef{{Terminal: node, Seq: decoy}}}, nil); criterion(r, "evidence") != 0 {
			t.Errorf("(b) unrelated output earned evidence credit: %+v", r)
		}
		// (c) the wrong node fails, and so does a neighbouring class.
		if r := dry(grader.Diagnosis{Class: class, Location: map[string]string{"node": other}, Evidence: real}, nil); r.Passed {
			t.Errorf("(c) the wrong location passed: %+v", r)
		}
		if r := dry(grader.Diagnosis{Class: "wrong-interface", Location: loc, Evidence: real}, nil); r.Passed {
			t.Errorf("(c) the wrong class passed: %+v", r)
		}
		// (d) flushing the ruleset of a healthy node fixes nothing.
		typeAndWait(t, l, other, "nft flush ruleset")
		bw, err := l.Measure(context.Background())
		t.Logf("after a fix on the wrong node: %.4f GB/s (%v), baseline %.4f", bw, err, l.Baseline())
		if r := dry(grader.Diagnosis{Class: class, Location: loc, Evidence: real}, &grader.Measurement{Baseline: l.Baseline(), After: bw}); criterion(r, "remediation") != 0 {
			t.Errorf("(d) a fix that does not fix earned remediation credit: %+v", r)
		}
		// (a) the real fix on the right node, the right diagnosis and real evidence pass.
		typeAndWait(t, l, node, "nft flush ruleset")
		res, err := l.Grade(context.Background(), grader.Diagnosis{Class: class, Location: loc, Evidence: real})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("(a) %+v", res)
		if !res.Passed || criterion(res, "evidence") == 0 || criterion(res, "remediation") == 0 {
			t.Errorf("(a) the right diagnosis with real evidence and a fix did not pass fully: %+v", res)
		}
	}
}

// ch06NodeAddr reads a node's IPv4 address on nic from its own shell.
func ch06NodeAddr(t *testing.T, l *session.Lab, node, nic string) string {
	t.Helper()
	seq := typeAndWait(t, l, node, "ip -4 -br addr show dev "+nic)
	cmds, _ := mustTerm(t, l, node).Commands()
	m := regexp.MustCompile(`(\d+\.\d+\.\d+\.\d+)/\d+`).FindStringSubmatch(cmds[seq-1].Output)
	if m == nil {
		t.Fatalf("%s: no IPv4 address on %s in %q", node, nic, cmds[seq-1].Output)
	}
	return m[1]
}
