package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/grader"
)

// TestLabCh09RoCESilentRetransmit runs chapter 9's second lab with a scripted learner:
// one node drops a few per cent of the RoCE (UDP 4791) packets one of its NICs receives.
// The job does not fail; ping is clean. The learner finds the QP with tens of thousands
// of retransmissions in train.log, then the node's rule, and removes it.
func TestLabCh09RoCESilentRetransmit(t *testing.T) {
	for _, seed := range []uint64{3, 6} {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { ch09SilentRetransmit(t, seed) })
	}
}

func ch09SilentRetransmit(t *testing.T, seed uint64) {
	l := labFixture(t, "ch09-roce-silent-retransmit", seed)
	v := l.Variant.Values
	node, nic := v["node"], v["nic"]
	t.Logf("variant: node=%s nic=%s percent=%s", node, nic, v["percent"])
	var healthy []string
	for _, n := range []string{"node1", "node2", "node3", "node4"} {
		if n != node {
			healthy = append(healthy, n)
		}
	}
	peer, other := healthy[0], healthy[1]
	otherNIC := map[string]string{"rdma0": "rdma1", "rdma1": "rdma0"}[nic]

	out := func(n string, seq int) string {
		cmds, _ := mustTerm(t, l, n).Commands()
		return cmds[seq-1].Output
	}
	expect := func(n, line, want string) int {
		seq := typeAndWait(t, l, n, line)
		o := out(n, seq)
		t.Logf("%s#%d %s:\n%s", n, seq, line, o)
		if !strings.Contains(o, want) {
			t.Errorf("%s: %q printed %q, want %q", n, line, o, want)
		}
		return seq
	}

	// The job's QP counters: poll until a faulted run has printed them.
	line := "grep 'QP to rank' train.log | grep -v ' 0 retransmitted'"
	var seq int
	for try := 0; ; try++ {
		seq = typeAndWait(t, l, peer, line)
		cmds, _ := mustTerm(t, l, peer).Commands()
		if patternMatches(t, l, peer, cmds[seq-1]) || try == 20 {
			t.Logf("%s#%d %s:\n%s", peer, seq, line, cmds[seq-1].Output)
			break
		}
		time.Sleep(3 * time.Second)
	}
	// ping is clean on the faulty NIC: the loss is RoCE only.
	nodeIP := ch06NodeAddr(t, l, node, nic)
	expect(peer, "ping -c 20 -i 0.2 -W 1 "+nodeIP, " 0% packet loss")
	nft := expect(node, "nft list ruleset", "udp dport 4791")
	healthyNft := typeAndWait(t, l, other, "nft list ruleset")
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
	class := "roce-loss"
	loc := map[string]string{"node": node, "nic": nic}
	real := []grader.EvidenceRef{{Terminal: node, Seq: nft}}
	if r := dry(grader.Diagnosis{Class: class, Location: loc, Evidence: []grader.EvidenceRef{{Terminal: peer, Seq: seq}}}, nil); criterion(r, "evidence") == 0 {
		t.Errorf("the QP counters earned no evidence credit: %+v", r)
	}
	if r := dry(grader.Diagnosis{Class: class, Location: loc, Evidence: real}, nil); criterion(r, "evidence") == 0 {
		t.Errorf("the nftables rule earned no evidence credit: %+v", r)
	}
	// (b) unrelated output and a healthy node's (empty) ruleset earn nothing.
	for _, ref := range []grader.EvidenceRef{{Terminal: node, Seq: decoy}, {Terminal: other, Seq: healthyNft}} {
		if r := dry(grader.Diagnosis{Class: class, Location: loc, Evidence: []grader.EvidenceRef{ref}}, nil); criterion(r, "evidence") != 0 {
			t.Errorf("(b) %s#%d earned evidence credit: %+v", ref.Terminal, ref.Seq, r)
		}
	}
	// (c) the wrong node, the other rail of the right node, and plain link loss all fail.
	for _, d := range []grader.Diagnosis{
		{Class: class, Location: map[string]string{"node": other, "nic": nic}, Evidence: real},
		{Class: class, Location: map[string]string{"node": node, "nic": otherNIC}, Evidence: real},
		{Class: "link-loss", Location: loc, Evidence: real},
	} {
		if r := dry(d, nil); r.Passed {
			t.Errorf("(c) %+v passed: %+v", d, r)
		}
	}
	// (d) flushing a healthy node's ruleset fixes nothing.
	typeAndWait(t, l, other, "nft flush ruleset")
	bw, err := l.Measure(context.Background())
	t.Logf("after a fix on a healthy node: %.4f GB/s (%v), baseline %.4f", bw, err, l.Baseline())
	if r := dry(grader.Diagnosis{Class: class, Location: loc, Evidence: real}, &grader.Measurement{Baseline: l.Baseline(), After: bw}); criterion(r, "remediation") != 0 {
		t.Errorf("(d) a fix that does not fix earned remediation credit: %+v", r)
	}
	// (a) the real fix on the node, the right diagnosis and real evidence pass.
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
