package chapters

import (
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/labs/record"
)

// TestLabCh18RailPinned runs chapter 18's lab with a scripted learner: the job uses four
// channels over four rails, and one node's profile.d pins NCCL_IB_HCA to rdma0. The
// learner lists each rank's NET/IB devices from the job log and reads the pinned node's
// login environment.
func TestLabCh18RailPinned(t *testing.T) {
	PlaySeeds(t, "ch18-rail-pinned", []uint64{18, 4}, func(lr *Learner) Verdicts {
		node := lr.V("node")
		other := Others(node, "node1", "node2")[0]
		lr.T.Logf("variant: node=%s", node)

		// The log shows the fault once the workload has started again with it.
		devs := lr.PollEvidence("node1", "grep -h 'NET/IB : Using' train.log | tail -n 4", 60, 2*time.Second)
		lr.T.Logf("devices:\n%s", lr.Out(devs))
		// The emulation sends by the kernel's routes, so the per-NIC counters stay balanced:
		// logged for the chapter, not evidence.
		tx := lr.Run(node, "cat /sys/class/net/rdma[0-3]/statistics/tx_bytes")
		lr.T.Logf("%s tx_bytes:\n%s", node, lr.Out(tx))
		bw := lr.Poll("node1", "grep -h 'Avg bus' train.log", 30, 2*time.Second, func(c record.Command) bool { return strings.Count(c.Output, "Avg bus") >= 2 })
		lr.T.Logf("busbw, before and after:\n%s", lr.Out(bw))
		prof := lr.Expect(node, "env | grep NCCL", "NCCL_IB_HCA=rdma0")
		healthy := lr.Run(other, "env | grep NCCL")
		healthyDevs := lr.Run("node1", "grep -h 'NET/IB : Using' train.log | grep '^"+other+":' | tail -n 1")
		return Verdicts{
			Right:     Answer{"wrong-interface", Loc{"node": node}},
			Counts:    []Ref{devs, prof},
			CountsNot: []Ref{healthy, healthyDevs},
			WrongAt:   []Loc{{"node": other}},
			WrongClass: []Answer{{Class: "nic-rate-limited", Loc: Loc{"node": node, "nic": "rdma0"}},
				{Class: "transport-forced"}},
		}
	})
}
