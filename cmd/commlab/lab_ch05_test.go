package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/grader"
)

// TestLabCh05AlgoMismatch runs chapter 5's lab with a scripted learner: one node's
// profile.d sets NCCL_ALGO=Tree, the other ranks use rings, and the first all_reduce
// never completes. The learner finds the one node whose init log reports NCCL_ALGO
// from the environment, and the variable in its login environment.
func TestLabCh05AlgoMismatch(t *testing.T) {
	l := labFixture(t, "ch05-algo-mismatch", 3)
	node := l.Variant.Values["node"]
	t.Logf("variant: node=%s", node)
	other := "node1"
	if node == "node1" {
		other = "node2"
	}

	// The job hangs after init: poll until a run has finished its init and failed.
	var failSeq int
	for try := 0; ; try++ {
		failSeq = typeAndWait(t, l, other, "grep -e 'Init COMPLETE' -e 'Test NCCL failure' -e WARN train.log")
		cmds, _ := mustTerm(t, l, other).Commands()
		if strings.Contains(cmds[failSeq-1].Output, "Test NCCL failure") || try == 20 {
			t.Logf("%s#%d:\n%s", other, failSeq, cmds[failSeq-1].Output)
			break
		}
		time.Sleep(3 * time.Second)
	}
	fc, _ := mustTerm(t, l, other).Commands()
	if !strings.Contains(fc[failSeq-1].Output, "Init COMPLETE") || !strings.Contains(fc[failSeq-1].Output, "Test NCCL failure") {
		t.Errorf("want a job that completes init and then fails:\n%s", fc[failSeq-1].Output)
	}
	line := "grep 'set by environment' train.log"
	logSeq := typeAndWait(t, l, other, line)
	lc, _ := mustTerm(t, l, other).Commands()
	t.Logf("%s#%d %s:\n%s", other, logSeq, line, lc[logSeq-1].Output)
	// The init lines of a healthy node: channels, trees, nothing forced.
	healthy := typeAndWait(t, l, other, "grep '^"+other+":' train.log | grep -e Channel -e Trees -e 'set by'")

	envSeq := typeAndWait(t, l, node, "env | grep NCCL")
	envCmds, _ := mustTerm(t, l, node).Commands()
	if !strings.Contains(envCmds[envSeq-1].Output, "NCCL_ALGO=Tree") {
		t.Errorf("%s: env shows no NCCL_ALGO=Tree:\n%s", node, envCmds[envSeq-1].Output)
	}
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
	class := "algo-proto-forced"
	loc := map[string]string{"node": node}
	for _, ref := range []grader.EvidenceRef{{Terminal: other, Seq: logSeq}, {Terminal: node, Seq: envSeq}} {
		if r := dry(grader.Diagnosis{Class: class, Location: loc, Evidence: []grader.EvidenceRef{ref}}); criterion(r, "evidence") == 0 {
			t.Errorf("%s#%d earned no evidence credit: %+v", ref.Terminal, ref.Seq, r)
		}
	}
	// (b) unrelated output, the failure lines, a healthy node's init lines and its env
	// earn nothing.
	for _, ref := range []grader.EvidenceRef{{Terminal: node, Seq: decoy}, {Terminal: other, Seq: failSeq}, {Terminal: other, Seq: healthy}, {Terminal: other, Seq: envOther}} {
		if r := dry(grader.Diagnosis{Class: class, Location: loc, Evidence: []grader.EvidenceRef{ref}}); criterion(r, "evidence") != 0 {
			t.Errorf("(b) %s#%d earned evidence credit: %+v", ref.Terminal, ref.Seq, r)
		}
	}
	// (c) the wrong node, and a neighbouring class, fail.
	real := []grader.EvidenceRef{{Terminal: other, Seq: logSeq}}
	if r := dry(grader.Diagnosis{Class: class, Location: map[string]string{"node": other}, Evidence: real}); r.Passed {
		t.Errorf("(c) the wrong location passed: %+v", r)
	}
	if r := dry(grader.Diagnosis{Class: "bootstrap-port-blocked", Location: loc, Evidence: real}); r.Passed {
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
