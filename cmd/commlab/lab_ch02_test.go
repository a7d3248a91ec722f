package main

import (
	"context"
	"testing"
	"time"

	"github.com/commlab/commlab/grader"
)

// TestLabCh02ByteBudget runs chapter 2's lab with a scripted learner: foreign flows
// land on one job node's switch port. The learner compares the rdma0 byte counters of
// the two job nodes with the all_reduce's byte budget and lists the flows with ss.
func TestLabCh02ByteBudget(t *testing.T) {
	l := labFixture(t, "ch02-byte-budget", 1)
	victim := l.Variant.Values["victim"]
	other := map[string]string{"node1": "node2", "node2": "node1"}[victim]
	t.Logf("variant: victim=%s rate=%s", victim, l.Variant.Values["rate"])

	stats := "ip -s link show dev rdma0"
	a := typeAndWait(t, l, victim, stats)
	typeAndWait(t, l, other, stats)
	time.Sleep(3 * time.Second)
	b := typeAndWait(t, l, victim, stats)
	typeAndWait(t, l, other, stats)
	vc, _ := mustTerm(t, l, victim).Commands()
	t.Logf("%s rdma0:\n%s\n%s", victim, vc[a-1].Output, vc[b-1].Output)

	var ssSeq int
	for try := 0; ; try++ {
		ssSeq = typeAndWait(t, l, victim, "ss -tn")
		cmds, _ := mustTerm(t, l, victim).Commands()
		if patternMatches(t, l, victim, cmds[ssSeq-1]) || try == 10 {
			t.Logf("%s#%d ss -tn:\n%s", victim, ssSeq, cmds[ssSeq-1].Output)
			break
		}
		time.Sleep(2 * time.Second)
	}
	ssOther := typeAndWait(t, l, other, "ss -tn")
	decoy := typeAndWait(t, l, victim, "ip -br link")

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
	class := "switch-congestion"
	loc := map[string]string{"port": victim}
	for _, ref := range []grader.EvidenceRef{{Terminal: victim, Seq: ssSeq}} {
		if r := dry(grader.Diagnosis{Class: class, Location: loc, Evidence: []grader.EvidenceRef{ref}}); criterion(r, "evidence") == 0 {
			t.Errorf("%s#%d earned no evidence credit: %+v", ref.Terminal, ref.Seq, r)
		}
	}
	// (b) unrelated output, one snapshot of the counters (a rate needs two, which the
	// grader cannot compare) and the healthy job node's connections earn nothing.
	for _, ref := range []grader.EvidenceRef{{Terminal: victim, Seq: decoy}, {Terminal: victim, Seq: b}, {Terminal: other, Seq: ssOther}} {
		if r := dry(grader.Diagnosis{Class: class, Location: loc, Evidence: []grader.EvidenceRef{ref}}); criterion(r, "evidence") != 0 {
			t.Errorf("(b) %s#%d earned evidence credit: %+v", ref.Terminal, ref.Seq, r)
		}
	}
	// (c) the other job node's port, and a neighbouring class, fail.
	real := []grader.EvidenceRef{{Terminal: victim, Seq: ssSeq}}
	if r := dry(grader.Diagnosis{Class: class, Location: map[string]string{"port": other}, Evidence: real}); r.Passed {
		t.Errorf("(c) the wrong location passed: %+v", r)
	}
	if r := dry(grader.Diagnosis{Class: "nic-rate-limited", Location: map[string]string{"node": victim, "nic": "rdma0"}, Evidence: real}); r.Passed {
		t.Errorf("(c) the wrong class passed: %+v", r)
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
