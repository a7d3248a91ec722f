package chapters

import (
	"testing"
	"time"
)

// TestLabCh20Tune plays chapter 20's tuning lab: nothing is injected; the job template
// forces NCCL_ALGO=Tree on 8 ranks over 4 nodes, where the emulation's rank-level tree
// sends most of its data across nodes. The learner reads the setting in train.log and
// tunes in ~/job.env. The template as it stands and the popular bigger buffer
// (NCCL_BUFFSIZE=16 MiB, one unpipelined slice per channel) earn no remediation;
// overriding the algorithm with Ring beats the start by the lab's 1.5×.
func TestLabCh20Tune(t *testing.T) {
	PlaySeeds(t, "ch20-tune-algo", []uint64{20}, func(lr *Learner) Verdicts {
		algo := lr.PollEvidence("node1", "grep -h 'set by environment' train.log | tail -n 8", 60, 2*time.Second)
		trees := lr.Run("node1", "grep -h 'Trees \\[0\\]' train.log | tail -n 8")
		chunk := lr.Run("node1", "grep -h 'P2P Chunksize' train.log | tail -n 1")
		bw := lr.Run("node1", "grep -h 'Avg bus' train.log")
		env := lr.Run("node1", "env | grep NCCL")

		lr.fixFails("the template as it stands", algo)
		return Verdicts{
			Right:     Answer{"algo-proto-forced", Loc{"node": "node1"}},
			Counts:    []Ref{algo},
			CountsNot: []Ref{trees, chunk, bw, env},
			WrongAt:   []Loc{{"node": "node2"}},
			WrongClass: []Answer{{Class: "transport-forced"}, {Class: "wrong-interface"},
				{Class: "nic-rate-limited", Loc: Loc{"node": "node2", "nic": "rdma0"}}},
			// The popular trap: a bigger buffer for big messages, with the tree kept.
			BadFix: func() {
				lr.Run("node1", `printf 'NCCL_BUFFSIZE=16777216\n' > ~/job.env`)
			},
			Fix: func() {
				lr.Run("node1", `printf '# a 4 MiB all_reduce over 4 nodes: the ring\nNCCL_ALGO=Ring\n' > ~/job.env`)
				lr.Expect("node1", "cat ~/job.env", "NCCL_ALGO=Ring")
			},
		}
	})
}
