package main

import (
	"strings"
	"testing"
	"time"
)

// TestLabCh10P2PDisabled runs chapter 10's lab with a scripted learner: one node's
// profile.d disables P2P and SHM, so its two ranks talk through the NIC. The learner
// sums up the transports of train.log, runs a single-node benchmark on each node, and
// finds the variables in the node's login environment. The lab has no remediation (a
// learner cannot edit /etc/profile.d).
func TestLabCh10P2PDisabled(t *testing.T) {
	shellVisibleBin(t)
	// Seeds 1 and 4 draw different nodes, so both rank numberings (0,1 and 2,3) are checked.
	playSeeds(t, "ch10-p2p-disabled", []uint64{1, 4}, ch10P2PDisabled)
}

func ch10P2PDisabled(lr *learner) verdicts {
	node := lr.v("node")
	other := others(node, "node1", "node2")[0]
	lr.t.Logf("variant: node=%s", node)

	// The job's log: poll until a run with the fault has printed its transports.
	transports := lr.pollEvidence(other, "grep via train.log", 20, 3*time.Second)
	// Single-node tests: the same command on both nodes, as the chapter does it.
	bench := "NCCL_DEBUG=INFO commlab bench all_reduce -g 2 -b 4M -e 4M -n 3 -w 1 | grep -e via -e Avg"
	faulty := lr.run(node, bench)
	healthy := lr.run(other, bench)
	bad, good := lr.out(faulty), lr.out(healthy)
	lr.t.Logf("single-node test on %s (faulty):\n%s", node, bad)
	lr.t.Logf("single-node test on %s (healthy):\n%s", other, good)
	if !strings.Contains(bad, "via NET/") {
		lr.t.Errorf("%s: the single-node test shows no NET transport:\n%s", node, bad)
	}
	if !strings.Contains(good, "via P2P/CUMEM") || strings.Contains(good, "via NET/") {
		lr.t.Errorf("%s: the healthy node's single-node test should use P2P/CUMEM only:\n%s", other, good)
	}
	// The login environment of the faulty node says why.
	env := lr.expect(node, "env | grep NCCL", "NCCL_P2P_DISABLE=1")
	decoy := lr.run(node, "ip -br link")
	return verdicts{
		right:  answer{"p2p-disabled", loc{"node": node}},
		counts: []ref{faulty, transports, env},
		// The healthy node's own single-node test earns nothing.
		countsNot: []ref{decoy, healthy},
		wrongAt:   []loc{{"node": other}},
	}
}
