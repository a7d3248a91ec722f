package main

import (
	"context"
	"regexp"
	"strconv"
	"testing"

	"github.com/commlab/commlab/grader"
)

// TestLabCh11PairwiseBadRail runs chapter 11's lab with a scripted learner: one node's
// NIC on one rail is throttled in both directions. The learner measures a pair that
// includes the bad node on the bad rail (slow) and a pair of healthy nodes on the same
// rail (fast) with iperf3, confirms with tc, and fixes both directions.
func TestLabCh11PairwiseBadRail(t *testing.T) {
	// Seed 9: node2's rdma1 at 40 Mbit/s.
	l := labFixture(t, "ch11-pairwise-bad-rail", 9)
	v := l.Variant.Values
	node, nic := v["node"], v["nic"]
	t.Logf("variant: node=%s nic=%s rate=%s", node, nic, v["rate"])
	var healthy []string
	for _, n := range []string{"node1", "node2", "node3", "node4"} {
		if n != node {
			healthy = append(healthy, n)
		}
	}
	a, b, c := healthy[0], healthy[1], healthy[2]

	// Servers on the bad node and on a healthy one, as the learner would start them.
	typeAndWait(t, l, node, "iperf3 -s -D")
	typeAndWait(t, l, b, "iperf3 -s -D")
	badIP := ch06NodeAddr(t, l, node, nic)
	goodIP := ch06NodeAddr(t, l, b, nic)

	rate := regexp.MustCompile(`([\d.]+) ([KM]?)bits/sec\s+receiver`)
	measure := func(from, ip string) (int, float64) {
		seq := typeAndWait(t, l, from, "iperf3 -c "+ip+" -t 3")
		cmds, _ := mustTerm(t, l, from).Commands()
		out := cmds[seq-1].Output
		m := rate.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("%s: no receiver line in:\n%s", from, out)
		}
		x, _ := strconv.ParseFloat(m[1], 64)
		if m[2] == "K" {
			x /= 1000
		}
		t.Logf("%s -> %s: %.1f Mbit/s\n%s", from, ip, x, out)
		return seq, x
	}
	slowSeq, slow := measure(a, badIP)
	fastSeq, fast := measure(c, goodIP)
	if slow >= 100 || fast < 100 {
		t.Errorf("pairs: with the bad node %.1f Mbit/s (want < 100), healthy pair %.1f Mbit/s (want >= 100)", slow, fast)
	}
	tcSeq := typeAndWait(t, l, node, "tc -s qdisc show dev "+nic)
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
	class := "nic-rate-limited"
	loc := map[string]string{"node": node, "nic": nic}
	real := []grader.EvidenceRef{{Terminal: a, Seq: slowSeq}}
	for _, ref := range []grader.EvidenceRef{real[0], {Terminal: node, Seq: tcSeq}} {
		if r := dry(grader.Diagnosis{Class: class, Location: loc, Evidence: []grader.EvidenceRef{ref}}, nil); criterion(r, "evidence") == 0 {
			t.Errorf("%s#%d earned no evidence credit: %+v", ref.Terminal, ref.Seq, r)
		}
	}
	// (b) the healthy pair's measurement and unrelated output earn nothing.
	for _, ref := range []grader.EvidenceRef{{Terminal: c, Seq: fastSeq}, {Terminal: node, Seq: decoy}} {
		if r := dry(grader.Diagnosis{Class: class, Location: loc, Evidence: []grader.EvidenceRef{ref}}, nil); criterion(r, "evidence") != 0 {
			t.Errorf("(b) %s#%d earned evidence credit: %+v", ref.Terminal, ref.Seq, r)
		}
	}
	// (c) the wrong node, or the right node on the wrong rail, fails.
	otherNIC := map[string]string{"rdma0": "rdma1", "rdma1": "rdma0"}[nic]
	for _, wrong := range []map[string]string{{"node": a, "nic": nic}, {"node": node, "nic": otherNIC}} {
		if r := dry(grader.Diagnosis{Class: class, Location: wrong, Evidence: real}, nil); r.Passed {
			t.Errorf("(c) the wrong location %v passed: %+v", wrong, r)
		}
	}
	// (d) half a fix: the outbound shaper put back, the inbound one left in place.
	typeAndWait(t, l, node, "tc qdisc replace dev "+nic+" root handle c1: tbf rate 200mbit burst 250kb latency 25ms")
	bw, err := l.Measure(context.Background())
	t.Logf("after fixing only the outbound direction: %.4f GB/s (%v), baseline %.4f", bw, err, l.Baseline())
	if r := dry(grader.Diagnosis{Class: class, Location: loc, Evidence: real}, &grader.Measurement{Baseline: l.Baseline(), After: bw}); criterion(r, "remediation") != 0 {
		t.Errorf("(d) half a fix earned remediation credit: %+v", r)
	}
	// (a) the whole fix, the right diagnosis and real evidence pass.
	typeAndWait(t, l, node, "tc qdisc del dev "+nic+" clsact")
	res, err := l.Grade(context.Background(), grader.Diagnosis{Class: class, Location: loc, Evidence: real})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("(a) %+v", res)
	if !res.Passed || criterion(res, "evidence") == 0 || criterion(res, "remediation") == 0 {
		t.Errorf("(a) the right diagnosis with real evidence and a fix did not pass fully: %+v", res)
	}
}
