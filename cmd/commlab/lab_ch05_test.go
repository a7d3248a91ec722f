package main

import (
	"strings"
	"testing"
	"time"
)

// TestLabCh05AlgoMismatch runs chapter 5's lab with a scripted learner: one node's
// profile.d sets NCCL_ALGO=Tree, the other ranks use rings, and the first all_reduce
// never completes. The learner finds the one node whose init log reports NCCL_ALGO
// from the environment, and the variable in its login environment.
func TestLabCh05AlgoMismatch(t *testing.T) {
	playLab(t, "ch05-algo-mismatch", 3, func(lr *learner) verdicts {
		node := lr.v("node")
		other := others(node, "node1", "node2")[0]
		lr.t.Logf("variant: node=%s", node)

		// The job hangs after init: poll until a run has finished its init and failed.
		failure := lr.poll(other, "grep -e 'Init COMPLETE' -e 'Test NCCL failure' -e WARN train.log", 20, 3*time.Second, printed("Test NCCL failure"))
		if out := lr.out(failure); !strings.Contains(out, "Init COMPLETE") || !strings.Contains(out, "Test NCCL failure") {
			lr.t.Errorf("want a job that completes init and then fails:\n%s", out)
		}
		forced := lr.run(other, "grep 'set by environment' train.log")
		lr.t.Logf("%s#%d:\n%s", other, forced.Seq, lr.out(forced))
		// The init lines of a healthy node: channels, trees, nothing forced.
		healthy := lr.run(other, "grep '^"+other+":' train.log | grep -e Channel -e Trees -e 'set by'")
		env := lr.expect(node, "env | grep NCCL", "NCCL_ALGO=Tree")
		healthyEnv := lr.run(other, "env | grep NCCL")
		decoy := lr.run(node, "ip -br link")
		return verdicts{
			right:      answer{"algo-proto-forced", loc{"node": node}},
			counts:     []ref{forced, env},
			countsNot:  []ref{decoy, failure, healthy, healthyEnv},
			wrongAt:    []loc{{"node": other}},
			wrongClass: []answer{{class: "bootstrap-port-blocked"}},
		}
	})
}
