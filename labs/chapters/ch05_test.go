package chapters

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
	Play(t, "ch05-algo-mismatch", 3, func(lr *Learner) Verdicts {
		node := lr.V("node")
		other := Others(node, "node1", "node2")[0]
		lr.T.Logf("variant: node=%s", node)

		// The job hangs after init: poll until a run has finished its init and failed.
		failure := lr.Poll(other, "grep -e 'Init COMPLETE' -e 'Test NCCL failure' -e WARN train.log", 20, 3*time.Second, Printed("Test NCCL failure"))
		if out := lr.Out(failure); !strings.Contains(out, "Init COMPLETE") || !strings.Contains(out, "Test NCCL failure") {
			lr.T.Errorf("want a job that completes init and then fails:\n%s", out)
		}
		forced := lr.Run(other, "grep 'set by environment' train.log")
		lr.T.Logf("%s#%d:\n%s", other, forced.Seq, lr.Out(forced))
		// The init lines of a healthy node: channels, trees, nothing forced.
		healthy := lr.Run(other, "grep '^"+other+":' train.log | grep -e Channel -e Trees -e 'set by'")
		env := lr.Expect(node, "env | grep NCCL", "NCCL_ALGO=Tree")
		healthyEnv := lr.Run(other, "env | grep NCCL")
		decoy := lr.Run(node, "ip -br link")
		return Verdicts{
			Right:      Answer{"algo-proto-forced", Loc{"node": node}},
			Counts:     []Ref{forced, env},
			CountsNot:  []Ref{decoy, failure, healthy, healthyEnv},
			WrongAt:    []Loc{{"node": other}},
			WrongClass: []Answer{{Class: "bootstrap-port-blocked"}},
		}
	})
}
