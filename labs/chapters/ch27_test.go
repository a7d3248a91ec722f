package chapters

import (
	"testing"
	"time"
)

// TestLabCh27PodWrongNIC runs chapter 27's lab with a scripted learner: one node's
// container env file sets NCCL_SOCKET_IFNAME=eth0, which overrides the job's "rdma" and
// puts that node's socket transport on the slow pod NIC. The learner reads the device
// line of that node's rank; the healthy node's device line and the identical NIC
// lists earn nothing.
func TestLabCh27PodWrongNIC(t *testing.T) {
	PlaySeeds(t, "ch27-pod-wrong-nic", []uint64{27, 4, 6}, func(lr *Learner) Verdicts {
		node := lr.V("node")
		other := Others(node, "node1", "node2")[0]
		lr.T.Logf("variant: node=%s", node)

		devs := lr.PollEvidence("node1", "grep -h 'NET/Socket : Using' train.log | tail -n 4", 60, 2*time.Second)
		healthyDevs := lr.Run("node1", "grep -h 'NET/Socket : Using' train.log | grep '^"+other+":' | tail -n 1")
		nics := lr.Run(node, "ip -br link")
		// The job's busbw shows that something changed, not where. (Not polled for the
		// slow run: waiting for it would cost ~15 s of make test for a decoy.)
		bw := lr.Run("node1", "grep -h 'Avg bus' train.log")
		return Verdicts{
			Right:     Answer{"wrong-interface", Loc{"node": node}},
			Counts:    []Ref{devs},
			CountsNot: []Ref{healthyDevs, nics, bw},
			WrongAt:   []Loc{{"node": other}},
			WrongClass: []Answer{{Class: "transport-forced"},
				{Class: "nic-rate-limited", Loc: Loc{"node": node, "nic": "eth0"}}},
		}
	})
}
