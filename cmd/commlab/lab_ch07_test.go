package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/grader"
)

// TestLabCh07ShmFirstWarn runs chapter 7's second lab with a scripted learner: one
// node's /dev/shm is too small, every rank of the job fails, and only the first WARN,
// on that node, names the cause. The learner finds it with grep; the cascade on the
// other nodes earns nothing.
func TestLabCh07ShmFirstWarn(t *testing.T) {
	l := labFixture(t, "ch07-shm-first-warn", 1)
	node := l.Variant.Values["node"]
	t.Logf("variant: node=%s", node)
	var other string
	for _, n := range []string{"node1", "node2", "node3", "node4"} {
		if n != node {
			other = n
			break
		}
	}
	term := mustTerm(t, l, "node1")

	// The workload fails in a loop; poll until a failed run has written its WARN.
	line := "grep 'NCCL WARN' train.log"
	var seq int
	for try := 0; ; try++ {
		seq = typeAndWait(t, l, "node1", line)
		cmds, _ := term.Commands()
		if patternMatches(t, l, "node1", cmds[seq-1]) || try == 30 {
			t.Logf("node1#%d %s:\n%s", seq, line, cmds[seq-1].Output)
			break
		}
		time.Sleep(3 * time.Second)
	}
	cmds, _ := term.Commands()
	// The cascade: WARN lines of another node, which do not name the cause.
	cascade := typeAndWait(t, l, "node1", fmt.Sprintf("grep 'NCCL WARN' train.log | grep -v 'failed to extend' | grep %s", other))
	cmds, _ = term.Commands()
	t.Logf("node1#%d cascade on %s:\n%s", cascade, other, cmds[cascade-1].Output)
	if strings.TrimSpace(cmds[cascade-1].Output) == "" {
		t.Logf("no cascade WARN on %s in this run", other)
	}
	decoy := typeAndWait(t, l, "node1", "ip -br link")

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
	class := "shm-too-small"
	loc := map[string]string{"node": node}
	real := []grader.EvidenceRef{{Terminal: "node1", Seq: seq}}
	// (b) an unrelated command, and the cascade on another node, earn nothing.
	if r := dry(grader.Diagnosis{Class: class, Location: loc, Evidence: []grader.EvidenceRef{{Terminal: "node1", Seq: decoy}}}); criterion(r, "evidence") != 0 {
		t.Errorf("(b) unrelated output earned evidence credit: %+v", r)
	}
	if r := dry(grader.Diagnosis{Class: class, Location: loc, Evidence: []grader.EvidenceRef{{Terminal: "node1", Seq: cascade}}}); criterion(r, "evidence") != 0 {
		t.Errorf("(b) the cascade on %s earned evidence credit: %+v", other, r)
	}
	// (c) the node whose ranks only reported the cascade, and a wrong class, fail.
	if r := dry(grader.Diagnosis{Class: class, Location: map[string]string{"node": other}, Evidence: real}); r.Passed {
		t.Errorf("(c) the wrong location passed: %+v", r)
	}
	if r := dry(grader.Diagnosis{Class: "transport-forced", Location: loc, Evidence: real}); r.Passed {
		t.Errorf("(c) the wrong class passed: %+v", r)
	}
	// (a) the right diagnosis with the first WARN as evidence passes.
	res, err := l.Grade(context.Background(), grader.Diagnosis{Class: class, Location: loc, Evidence: real})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("(a) %+v", res)
	if !res.Passed || criterion(res, "evidence") == 0 {
		t.Errorf("(a) the right diagnosis with real evidence did not pass fully: %+v", res)
	}
}
