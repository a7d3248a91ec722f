package main

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
	playSeeds(t, "ch18-rail-pinned", []uint64{18, 4}, func(lr *learner) verdicts {
		node := lr.v("node")
		other := others(node, "node1", "node2")[0]
		lr.t.Logf("variant: node=%s", node)

		// The log shows the fault once the workload has started again with it.
		devs := lr.pollEvidence("node1", "grep -h 'NET/IB : Using' train.log | tail -n 4", 60, 2*time.Second)
		lr.t.Logf("devices:\n%s", lr.out(devs))
		// The emulation sends by the kernel's routes, so the per-NIC counters stay balanced:
		// logged for the chapter, not evidence.
		tx := lr.run(node, "cat /sys/class/net/rdma[0-3]/statistics/tx_bytes")
		lr.t.Logf("%s tx_bytes:\n%s", node, lr.out(tx))
		bw := lr.poll("node1", "grep -h 'Avg bus' train.log", 30, 2*time.Second, func(c record.Command) bool { return strings.Count(c.Output, "Avg bus") >= 2 })
		lr.t.Logf("busbw, before and after:\n%s", lr.out(bw))
		prof := lr.expect(node, "env | grep NCCL", "NCCL_IB_HCA=rdma0")
		healthy := lr.run(other, "env | grep NCCL")
		healthyDevs := lr.run("node1", "grep -h 'NET/IB : Using' train.log | grep '^"+other+":' | tail -n 1")
		return verdicts{
			right:     answer{"wrong-interface", loc{"node": node}},
			counts:    []ref{devs, prof},
			countsNot: []ref{healthy, healthyDevs},
			wrongAt:   []loc{{"node": other}},
			wrongClass: []answer{{class: "nic-rate-limited", loc: loc{"node": node, "nic": "rdma0"}},
				{class: "transport-forced"}},
		}
	})
}
