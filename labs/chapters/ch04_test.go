package chapters

import (
	"strings"
	"testing"
	"time"
)

// TestLabCh04IBDisabled runs chapter 4's lab with a scripted learner: one node's
// profile.d sets NCCL_IB_DISABLE=1, its rank falls back to NET/Socket while the others
// use (emulated) NET/IB, and the job fails. The learner reads which network each node
// chose in train.log and finds the variable in the node's login environment.
func TestLabCh04IBDisabled(t *testing.T) {
	Play(t, "ch04-ib-disabled", 1, func(lr *Learner) Verdicts {
		node := lr.V("node")
		other := Others(node, "node1", "node2")[0]
		lr.T.Logf("variant: node=%s", node)

		// The log: poll until a run with the fault has printed every rank's network.
		networks := lr.PollEvidence(other, "grep -e 'Using network' -e 'set by environment' -e mismatch train.log", 20, 3*time.Second)
		if out := lr.Out(networks); !strings.Contains(out, other+":") || !strings.Contains(out, "Using network IB") {
			lr.T.Errorf("the healthy nodes should use NET/IB:\n%s", out)
		}
		// The healthy nodes' lines alone: they say IB, which is no evidence.
		healthy := lr.Run(other, "grep 'Using network' train.log | grep -v '^"+node+":'")
		env := lr.Expect(node, "env | grep NCCL", "NCCL_IB_DISABLE=1")
		healthyEnv := lr.Run(other, "env | grep NCCL")
		decoy := lr.Run(node, "ip -br link")
		return Verdicts{
			Right:      Answer{"transport-forced", Loc{"node": node}},
			Counts:     []Ref{networks, env},
			CountsNot:  []Ref{decoy, healthy, healthyEnv},
			WrongAt:    []Loc{{"node": other}},
			WrongClass: []Answer{{Class: "wrong-interface"}},
		}
	})
}
