package chapters

import (
	"strings"
	"testing"
	"time"
)

// TestLabCh22TPAcrossNodes runs chapter 22's lab with a scripted learner: 4 ranks on 2
// nodes are split into two 2-rank "TP" groups, meant as {0,1} and {2,3} (mask 0x2,
// inside a node), but a profile script on both nodes sets NCCL_TESTS_SPLIT_MASK=0x1,
// so the groups are {0,2} and {1,3} and every group connection crosses the network.
// The learner reads the Group column, the groups' channel lines (NET where a node's
// P2P was meant) and the script. Nothing is timed: the split decides the transport.
func TestLabCh22TPAcrossNodes(t *testing.T) {
	PlaySeeds(t, "ch22-tp-across-nodes", []uint64{22, 3}, func(lr *Learner) Verdicts {
		file := lr.V("file")
		lr.T.Logf("variant: file=%s", file)

		// The healthy baseline run (mask 0x2) is in the log too; wait for a faulted one.
		groups := lr.Poll("node1", "grep -h -e '==>' -e 'Group' train.log | tail -n 5", 30, 2*time.Second,
			Printed("Rank  1 Group  1 "))
		out := lr.Out(groups)
		for _, want := range []string{"Rank  0 Group  0 ", "Rank  2 Group  0 ", "Rank  3 Group  1 "} {
			if !strings.Contains(out, want) {
				lr.T.Errorf("device table: want %q (groups {0,2} and {1,3}):\n%s", want, out)
			}
		}
		net := lr.Expect("node2", "grep -h 'via NET' train.log | tail -n 8", "via NET/Socket/0")
		profile := lr.Expect("node2", "cat /etc/profile.d/"+file, "export NCCL_TESTS_SPLIT_MASK=0x1")
		// The baseline's groups, inside a node: how it should look, not the fault.
		healthy := lr.Expect("node1", "grep -h 'via P2P' train.log | head -n 4", "via P2P/CUMEM")
		rail := lr.Run("node1", "tc -s qdisc show dev rdma0")
		// Typed, not read from the log or the environment: no credit.
		fake := lr.Run("node1", "echo 'node1:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0 NCCL_TESTS_SPLIT_MASK=0x1'")
		return Verdicts{
			Right:     Answer{"comm-group-misplaced", Loc{}},
			Counts:    []Ref{net, groups, profile},
			CountsNot: []Ref{healthy, rail, fake},
			// Nearby readings that are wrong: NET where P2P was expected looks like a
			// transport forced off P2P, a wrong interface, or a slow rail.
			WrongClass: []Answer{
				{Class: "transport-forced", Loc: Loc{"node": "node1"}},
				{Class: "wrong-interface", Loc: Loc{"node": "node2"}},
				{Class: "nic-rate-limited", Loc: Loc{"node": "node1", "nic": "rdma0"}},
			},
		}
	})
}
