package main

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestLabCh03IntraNodeViaNet runs chapter 3's lab with a scripted learner: eight ranks
// on four nodes, and one node's profile.d disables P2P and SHM, so its two ranks talk
// through the NIC. The learner maps ranks to nodes from the log, then reads the
// transport of each intra-node pair, and finds the variables in the node's login
// environment.
func TestLabCh03IntraNodeViaNet(t *testing.T) {
	playLab(t, "ch03-intra-node-via-net", 2, func(lr *learner) verdicts {
		node := lr.v("node")
		other := others(node, "node1", "node2")[0]
		lr.t.Logf("variant: node=%s", node)

		// Which rank runs where: the device lines of the table.
		rankMap := lr.poll(other, "grep '#  Rank' train.log", 20, 3*time.Second, printed("Rank  7"))
		// The transports of the faulty node's connections.
		transports := lr.pollEvidence(other, "grep via train.log | grep '^"+node+":'", 20, 3*time.Second)
		// The intra-node connections of the healthy nodes: P2P/CUMEM, no evidence.
		p2p := lr.run(other, "grep 'via P2P' train.log")
		out := lr.out(p2p)
		if !strings.Contains(out, "via P2P/CUMEM") {
			lr.t.Errorf("no P2P/CUMEM connection on the healthy nodes:\n%s", out)
		}
		// train.log keeps every run, the healthy one before the fault included; in
		// the latest run (after the last "==> " header) the faulty node has no P2P.
		runs := strings.Split(lr.out(lr.run(other, "cat train.log")), "\n==> ")
		if last := runs[len(runs)-1]; strings.Contains(last, node+":") && strings.Contains(last, "via P2P") &&
			regexp.MustCompile(`(?m)^`+node+`:\S+ \[\d\] NCCL INFO Channel .* via P2P`).MatchString(last) {
			lr.t.Errorf("%s still has a P2P/CUMEM connection in the latest run:\n%s", node, last)
		}
		// The cross-node connections of a healthy node go via NET too: no evidence either.
		cross := lr.run(other, "grep via train.log | grep '^"+other+":' | grep NET/")
		env := lr.expect(node, "env | grep NCCL", "NCCL_P2P_DISABLE=1")
		decoy := lr.run(node, "ip -br link")
		return verdicts{
			right:      answer{"p2p-disabled", loc{"node": node}},
			counts:     []ref{transports, env},
			countsNot:  []ref{decoy, rankMap, p2p, cross},
			wrongAt:    []loc{{"node": other}},
			wrongClass: []answer{{"nvlink-down", loc{"node": node, "gpu": "0"}}},
		}
	})
}
