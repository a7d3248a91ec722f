package chapters

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
	// Seeds 1 and 4 draw different nodes, so both rank numberings (0,1 and 2,3) are checked.
	PlaySeeds(t, "ch10-p2p-disabled", []uint64{1, 4}, ch10P2PDisabled)
}

func ch10P2PDisabled(lr *Learner) Verdicts {
	node := lr.V("node")
	other := Others(node, "node1", "node2")[0]
	lr.T.Logf("variant: node=%s", node)

	// The job's log: poll until a run with the fault has printed its transports.
	transports := lr.PollEvidence(other, "grep via train.log", 20, 3*time.Second)
	// Single-node tests: the same command on both nodes, as the chapter does it.
	bench := "NCCL_DEBUG=INFO commlab bench all_reduce -g 2 -b 4M -e 4M -n 3 -w 1 | grep -e via -e Avg"
	faulty := lr.Run(node, bench)
	healthy := lr.Run(other, bench)
	bad, good := lr.Out(faulty), lr.Out(healthy)
	lr.T.Logf("single-node test on %s (faulty):\n%s", node, bad)
	lr.T.Logf("single-node test on %s (healthy):\n%s", other, good)
	if !strings.Contains(bad, "via NET/") {
		lr.T.Errorf("%s: the single-node test shows no NET transport:\n%s", node, bad)
	}
	if !strings.Contains(good, "via P2P/CUMEM") || strings.Contains(good, "via NET/") {
		lr.T.Errorf("%s: the healthy node's single-node test should use P2P/CUMEM only:\n%s", other, good)
	}
	// The login environment of the faulty node says why.
	env := lr.Expect(node, "env | grep NCCL", "NCCL_P2P_DISABLE=1")
	decoy := lr.Run(node, "ip -br link")
	return Verdicts{
		Right:  Answer{"p2p-disabled", Loc{"node": node}},
		Counts: []Ref{faulty, transports, env},
		// The healthy node's own single-node test earns nothing.
		CountsNot: []Ref{decoy, healthy},
		WrongAt:   []Loc{{"node": other}},
	}
}
