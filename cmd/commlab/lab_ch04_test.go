package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/grader"
)

// TestLabCh04IBDisabled runs chapter 4's lab with a scripted learner: one node's
// profile.d sets NCCL_IB_DISABLE=1, its rank falls back to NET/Socket while the others
// use (emulated) NET/IB, and the job fails. The learner reads which network each node
// chose in train.log and finds the variable in the node's login environment.
func TestLabCh04IBDisabled(t *testing.T) {
	l := labFixture(t, "ch04-ib-disabled", 1)
	node := l.Variant.Values["node"]
	t.Logf("variant: node=%s", node)
	other := "node1"
	if node == "node1" {
		other = "node2"
	}

	// The log: poll until a run with the fault has printed every rank's network.
	line := "grep -e 'Using network' -e 'set by environment' -e mismatch train.log"
	var logSeq int
	for try := 0; ; try++ {
		logSeq = typeAndWait(t, l, other, line)
		cmds, _ := mustTerm(t, l, other).Commands()
		if patternMatches(t, l, other, cmds[logSeq-1]) || try == 20 {
			t.Logf("%s#%d %s:\n%s", other, logSeq, line, cmds[logSeq-1].Output)
			break
		}
		time.Sleep(3 * time.Second)
	}
	logs, _ := mustTerm(t, l, other).Commands()
	out := logs[logSeq-1].Output
	if !strings.Contains(out, other+":") || !strings.Contains(out, "Using network IB") {
		t.Errorf("the healthy nodes should use NET/IB:\n%s", out)
	}
	// The healthy nodes' lines alone: they say IB, which is no evidence.
	healthy := typeAndWait(t, l, other, "grep 'Using network' train.log | grep -v '^"+node+":'")

	envSeq := typeAndWait(t, l, node, "env | grep NCCL")
	envCmds, _ := mustTerm(t, l, node).Commands()
	if !strings.Contains(envCmds[envSeq-1].Output, "NCCL_IB_DISABLE=1") {
		t.Errorf("%s: env shows no NCCL_IB_DISABLE=1:\n%s", node, envCmds[envSeq-1].Output)
	}
	// The same command on a healthy node.
	envOther := typeAndWait(t, l, other, "env | grep NCCL")
	decoy := typeAndWait(t, l, node, "ip -br link")

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
	class := "transport-forced"
	loc := map[string]string{"node": node}
	for _, ref := range []grader.EvidenceRef{{Terminal: other, Seq: logSeq}, {Terminal: node, Seq: envSeq}} {
		if r := dry(grader.Diagnosis{Class: class, Location: loc, Evidence: []grader.EvidenceRef{ref}}); criterion(r, "evidence") == 0 {
			t.Errorf("%s#%d earned no evidence credit: %+v", ref.Terminal, ref.Seq, r)
		}
	}
	// (b) unrelated output, the healthy nodes' lines and a healthy node's env earn nothing.
	for _, ref := range []grader.EvidenceRef{{Terminal: node, Seq: decoy}, {Terminal: other, Seq: healthy}, {Terminal: other, Seq: envOther}} {
		if r := dry(grader.Diagnosis{Class: class, Location: loc, Evidence: []grader.EvidenceRef{ref}}); criterion(r, "evidence") != 0 {
			t.Errorf("(b) %s#%d earned evidence credit: %+v", ref.Terminal, ref.Seq, r)
		}
	}
	// (c) the wrong node, and a neighbouring class, fail.
	real := []grader.EvidenceRef{{Terminal: other, Seq: logSeq}}
	if r := dry(grader.Diagnosis{Class: class, Location: map[string]string{"node": other}, Evidence: real}); r.Passed {
		t.Errorf("(c) the wrong location passed: %+v", r)
	}
	if r := dry(grader.Diagnosis{Class: "wrong-interface", Location: loc, Evidence: real}); r.Passed {
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
