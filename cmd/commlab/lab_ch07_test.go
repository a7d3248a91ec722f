package main

import (
	"strings"
	"testing"
	"time"
)

// TestLabCh07ShmFirstWarn runs chapter 7's second lab with a scripted learner: one
// node's /dev/shm is too small, every rank of the job fails, and only the first WARN,
// on that node, names the cause. The learner finds it with grep; the cascade on the
// other nodes earns nothing.
func TestLabCh07ShmFirstWarn(t *testing.T) {
	playLab(t, "ch07-shm-first-warn", 1, func(lr *learner) verdicts {
		node := lr.v("node")
		other := others(node, fourNodes...)[0]
		lr.t.Logf("variant: node=%s", node)

		// The workload fails in a loop; poll until a failed run has written its WARN.
		firstWarn := lr.pollEvidence("node1", "grep 'NCCL WARN' train.log", 30, 3*time.Second)
		// The cascade: WARN lines of another node, which do not name the cause.
		cascade := lr.run("node1", "grep 'NCCL WARN' train.log | grep -v 'failed to extend' | grep "+other)
		lr.t.Logf("node1#%d cascade on %s:\n%s", cascade.Seq, other, lr.out(cascade))
		if strings.TrimSpace(lr.out(cascade)) == "" {
			lr.t.Logf("no cascade WARN on %s in this run", other)
		}
		decoy := lr.run("node1", "ip -br link")
		return verdicts{
			right:     answer{"shm-too-small", loc{"node": node}},
			counts:    []ref{firstWarn},
			countsNot: []ref{decoy, cascade},
			// The node whose ranks only reported the cascade fails.
			wrongAt:    []loc{{"node": other}},
			wrongClass: []answer{{class: "transport-forced"}},
		}
	})
}
