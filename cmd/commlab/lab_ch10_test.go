package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/grader"
)

// TestLabCh10P2PDisabled runs chapter 10's lab with a scripted learner: one node's
// profile.d disables P2P and SHM, so its two ranks talk through the NIC. The learner
// sums up the transports of train.log, runs a single-node benchmark on each node, and
// finds the variables in the node's login environment. The lab has no remediation (a
// learner cannot edit /etc/profile.d).
func TestLabCh10P2PDisabled(t *testing.T) {
	// Seeds 1 and 4 draw different nodes, so both rank numberings (0,1 and 2,3) are checked.
	for _, seed := range []uint64{1, 4} {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { ch10P2PDisabled(t, seed) })
	}
}

func ch10P2PDisabled(t *testing.T, seed uint64) {
	shellVisibleBin(t)
	l := labFixture(t, "ch10-p2p-disabled", seed)
	node := l.Variant.Values["node"]
	other := map[string]string{"node1": "node2", "node2": "node1"}[node]
	t.Logf("variant: node=%s", node)

	// The job's log: poll until a run with the fault has printed its transports.
	line := "grep via train.log"
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

	// Single-node tests: the same command on both nodes, as the chapter does it.
	bench := "NCCL_DEBUG=INFO commlab bench all_reduce -g 2 -b 4M -e 4M -n 3 -w 1 | grep -e via -e Avg"
	benchSeq := typeAndWait(t, l, node, bench)
	healthySeq := typeAndWait(t, l, other, bench)
	bad, _ := mustTerm(t, l, node).Commands()
	good, _ := mustTerm(t, l, other).Commands()
	t.Logf("single-node test on %s (faulty):\n%s", node, bad[benchSeq-1].Output)
	t.Logf("single-node test on %s (healthy):\n%s", other, good[healthySeq-1].Output)
	if !strings.Contains(bad[benchSeq-1].Output, "via NET/") {
		t.Errorf("%s: the single-node test shows no NET transport:\n%s", node, bad[benchSeq-1].Output)
	}
	if !strings.Contains(good[healthySeq-1].Output, "via P2P/IPC") || strings.Contains(good[healthySeq-1].Output, "via NET/") {
		t.Errorf("%s: the healthy node's single-node test should use P2P/IPC only:\n%s", other, good[healthySeq-1].Output)
	}

	// The login environment of the faulty node says why.
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
	for _, ref := range []grader.EvidenceRef{{Terminal: other, Seq: logSeq}, {Terminal: node, Seq: benchSeq}, {Terminal: node, Seq: envSeq}} {
		if r := dry(grader.Diagnosis{Class: class, Location: loc, Evidence: []grader.EvidenceRef{ref}}); criterion(r, "evidence") == 0 {
			t.Errorf("%s#%d earned no evidence credit: %+v", ref.Terminal, ref.Seq, r)
		}
	}
	// (b) unrelated output, and the healthy node's own single-node test, earn nothing.
	for _, ref := range []grader.EvidenceRef{{Terminal: node, Seq: decoy}, {Terminal: other, Seq: healthySeq}} {
		if r := dry(grader.Diagnosis{Class: class, Location: loc, Evidence: []grader.EvidenceRef{ref}}); criterion(r, "evidence") != 0 {
			t.Errorf("(b) %s#%d earned evidence credit: %+v", ref.Terminal, ref.Seq, r)
		}
	}
	// (c) the wrong node fails.
	real := []grader.EvidenceRef{{Terminal: node, Seq: benchSeq}}
	if r := dry(grader.Diagnosis{Class: class, Location: map[string]string{"node": other}, Evidence: real}); r.Passed {
		t.Errorf("(c) the wrong location passed: %+v", r)
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

// shellVisibleBin makes the lab's commlab binary one a learner shell can run. Labs put
// the binary's directory on the shell's PATH, but buildSelf builds into a private
// directory under /tmp, which a learner shell does not see (its /tmp is the sandbox's
// own). Labs that have the learner run `commlab bench` build it once into a directory
// outside /tmp, readable by everyone, and remove it when the test ends.
func shellVisibleBin(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("labs need root")
	}
	if selfBin != "" && !strings.HasPrefix(selfBin, os.TempDir()) {
		return
	}
	dir, err := os.MkdirTemp("/var/lib", "commlab-labtest-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "commlab")
	t.Cleanup(func() { os.RemoveAll(dir) })
	buildInto(t, out)
	prev := selfBin
	selfBin = out
	t.Cleanup(func() { selfBin = prev })
}
