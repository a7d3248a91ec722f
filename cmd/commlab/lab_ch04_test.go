package main

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
	playLab(t, "ch04-ib-disabled", 1, func(lr *learner) verdicts {
		node := lr.v("node")
		other := others(node, "node1", "node2")[0]
		lr.t.Logf("variant: node=%s", node)

		// The log: poll until a run with the fault has printed every rank's network.
		networks := lr.pollEvidence(other, "grep -e 'Using network' -e 'set by environment' -e mismatch train.log", 20, 3*time.Second)
		if out := lr.out(networks); !strings.Contains(out, other+":") || !strings.Contains(out, "Using network IB") {
			lr.t.Errorf("the healthy nodes should use NET/IB:\n%s", out)
		}
		// The healthy nodes' lines alone: they say IB, which is no evidence.
		healthy := lr.run(other, "grep 'Using network' train.log | grep -v '^"+node+":'")
		env := lr.expect(node, "env | grep NCCL", "NCCL_IB_DISABLE=1")
		healthyEnv := lr.run(other, "env | grep NCCL")
		decoy := lr.run(node, "ip -br link")
		return verdicts{
			right:      answer{"transport-forced", loc{"node": node}},
			counts:     []ref{networks, env},
			countsNot:  []ref{decoy, healthy, healthyEnv},
			wrongAt:    []loc{{"node": other}},
			wrongClass: []answer{{class: "wrong-interface"}},
		}
	})
}
