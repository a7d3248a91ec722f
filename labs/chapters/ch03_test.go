package chapters

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
	Play(t, "ch03-intra-node-via-net", 2, func(lr *Learner) Verdicts {
		node := lr.V("node")
		other := Others(node, "node1", "node2")[0]
		lr.T.Logf("variant: node=%s", node)

		// Which rank runs where: the device lines of the table.
		rankMap := lr.Poll(other, "grep '#  Rank' train.log", 20, 3*time.Second, Printed("Rank  7"))
		// The transports of the faulty node's connections.
		transports := lr.PollEvidence(other, "grep via train.log | grep '^"+node+":'", 20, 3*time.Second)
		// The intra-node connections of the healthy nodes: P2P/CUMEM, no evidence.
		p2p := lr.Run(other, "grep 'via P2P' train.log")
		out := lr.Out(p2p)
		if !strings.Contains(out, "via P2P/CUMEM") {
			lr.T.Errorf("no P2P/CUMEM connection on the healthy nodes:\n%s", out)
		}
		// train.log keeps every run, the healthy one before the fault included; in
		// the latest run (after the last "==> " header) the faulty node has no P2P.
		runs := strings.Split(lr.Out(lr.Run(other, "cat train.log")), "\n==> ")
		if last := runs[len(runs)-1]; strings.Contains(last, node+":") && strings.Contains(last, "via P2P") &&
			regexp.MustCompile(`(?m)^`+node+`:\S+ \[\d\] NCCL INFO Channel .* via P2P`).MatchString(last) {
			lr.T.Errorf("%s still has a P2P/CUMEM connection in the latest run:\n%s", node, last)
		}
		// The cross-node connections of a healthy node go via NET too: no evidence either.
		cross := lr.Run(other, "grep via train.log | grep '^"+other+":' | grep NET/")
		env := lr.Expect(node, "env | grep NCCL", "NCCL_P2P_DISABLE=1")
		decoy := lr.Run(node, "ip -br link")
		return Verdicts{
			Right:      Answer{"p2p-disabled", Loc{"node": node}},
			Counts:     []Ref{transports, env},
			CountsNot:  []Ref{decoy, rankMap, p2p, cross},
			WrongAt:    []Loc{{"node": other}},
			WrongClass: []Answer{{"nvlink-down", Loc{"node": node, "gpu": "0"}}},
		}
	})
}
