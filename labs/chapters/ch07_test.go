package chapters

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
	Play(t, "ch07-shm-first-warn", 1, func(lr *Learner) Verdicts {
		node := lr.V("node")
		other := Others(node, FourNodes...)[0]
		lr.T.Logf("variant: node=%s", node)

		// The workload fails in a loop; poll until a failed run has written its WARN.
		firstWarn := lr.PollEvidence("node1", "grep 'NCCL WARN' train.log", 30, 3*time.Second)
		// The cascade: WARN lines of another node, which do not name the cause.
		cascade := lr.Run("node1", "grep 'NCCL WARN' train.log | grep -v 'failed to extend' | grep "+other)
		lr.T.Logf("node1#%d cascade on %s:\n%s", cascade.Seq, other, lr.Out(cascade))
		if strings.TrimSpace(lr.Out(cascade)) == "" {
			lr.T.Logf("no cascade WARN on %s in this run", other)
		}
		decoy := lr.Run("node1", "ip -br link")
		return Verdicts{
			Right:     Answer{"shm-too-small", Loc{"node": node}},
			Counts:    []Ref{firstWarn},
			CountsNot: []Ref{decoy, cascade},
			// The node whose ranks only reported the cascade fails.
			WrongAt:    []Loc{{"node": other}},
			WrongClass: []Answer{{Class: "transport-forced"}},
		}
	})
}
