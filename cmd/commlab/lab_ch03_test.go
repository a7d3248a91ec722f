package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/grader"
)

// TestLabCh03IntraNodeViaNet runs chapter 3's lab with a scripted learner: eight ranks
// on four nodes, and one node's profile.d disables P2P and SHM, so its two ranks talk
// through the NIC. The learner maps ranks to nodes from the log, then reads the
// transport of each intra-node pair, and finds the variables in the node's login
// environment.
func TestLabCh03IntraNodeViaNet(t *testing.T) {
	l := labFixture(t, "ch03-intra-node-via-net", 2)
	node := l.Variant.Values["node"]
	t.Logf("variant: node=%s", node)
	other := "node1"
	if node == "node1" {
		other = "node2"
	}

	// Which rank runs where: the device lines of the table.
	var mapSeq int
	for try := 0; ; try++ {
		mapSeq = typeAndWait(t, l, other, "grep '#  Rank' train.log")
		cmds, _ := mustTerm(t, l, other).Commands()
		if strings.Contains(cmds[mapSeq-1].Output, "Rank  7") || try == 20 {
			t.Logf("%s#%d rank map:\n%s", other, mapSeq, cmds[mapSeq-1].Output)
			break
		}
		time.Sleep(3 * time.Second)
	}
	// The transports of the faulty node's connections.
	line := "grep via train.log | grep '^" + node + ":'"
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
	// The intra-node connections of the healthy nodes: P2P/IPC, no evidence.
	healthy := typeAndWait(t, l, other, "grep 'via P2P' train.log")
	hc, _ := mustTerm(t, l, other).Commands()
	if !strings.Contains(hc[healthy-1].Output, "via P2P/IPC") {
		t.Errorf("no P2P/IPC connection on the healthy nodes:\n%s", hc[healthy-1].Output)
	}
	if strings.Contains(hc[healthy-1].Output, node+":") {
		t.Errorf("%s still has a P2P/IPC connection:\n%s", node, hc[healthy-1].Output)
	}
	// The cross-node connections of a healthy node go via NET too: no evidence either.
	cross := typeAndWait(t, l, other, "grep via train.log | grep '^"+other+":' | grep NET/")

	envSeq := typeAndWait(t, l, node, "env | grep NCCL")
	envCmds, _ := mustTerm(t, l, node).Commands()
	if !strings.Contains(envCmds[envSeq-1].Output, "NCCL_P2P_DISABLE=1") {
		t.Errorf("%s: env shows no NCCL_P2P_DISABLE=1:\n%s", node, envCmds[envSeq-1].Output)
	}
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
	class := "p2p-disabled"
	loc := map[string]string{"node": node}
	for _, ref := range []grader.EvidenceRef{{Terminal: other, Seq: logSeq}, {Terminal: node, Seq: envSeq}} {
		if r := dry(grader.Diagnosis{Class: class, Location: loc, Evidence: []grader.EvidenceRef{ref}}); criterion(r, "evidence") == 0 {
			t.Errorf("%s#%d earned no evidence credit: %+v", ref.Terminal, ref.Seq, r)
		}
	}
	// (b) unrelated output, the rank map, the healthy P2P lines and a healthy node's
	// cross-node NET lines earn nothing.
	for _, ref := range []grader.EvidenceRef{{Terminal: node, Seq: decoy}, {Terminal: other, Seq: mapSeq}, {Terminal: other, Seq: healthy}, {Terminal: other, Seq: cross}} {
		if r := dry(grader.Diagnosis{Class: class, Location: loc, Evidence: []grader.EvidenceRef{ref}}); criterion(r, "evidence") != 0 {
			t.Errorf("(b) %s#%d earned evidence credit: %+v", ref.Terminal, ref.Seq, r)
		}
	}
	// (c) the wrong node, and a neighbouring class, fail.
	real := []grader.EvidenceRef{{Terminal: other, Seq: logSeq}}
	if r := dry(grader.Diagnosis{Class: class, Location: map[string]string{"node": other}, Evidence: real}); r.Passed {
		t.Errorf("(c) the wrong location passed: %+v", r)
	}
	if r := dry(grader.Diagnosis{Class: "nvlink-down", Location: map[string]string{"node": node, "gpu": "0"}, Evidence: real}); r.Passed {
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
