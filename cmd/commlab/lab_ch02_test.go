package main

import (
	"testing"
	"time"
)

// TestLabCh02ByteBudget runs chapter 2's lab with a scripted learner: foreign flows
// land on one job node's switch port. The learner compares the rdma0 byte counters of
// the two job nodes with the all_reduce's byte budget and lists the flows with ss.
func TestLabCh02ByteBudget(t *testing.T) {
	playLab(t, "ch02-byte-budget", 1, func(lr *learner) verdicts {
		victim := lr.v("victim")
		other := others(victim, "node1", "node2")[0]
		lr.t.Logf("variant: victim=%s rate=%s", victim, lr.v("rate"))

		stats := "ip -s link show dev rdma0"
		before := lr.run(victim, stats)
		lr.run(other, stats)
		time.Sleep(3 * time.Second)
		after := lr.run(victim, stats)
		lr.run(other, stats)
		lr.t.Logf("%s rdma0:\n%s\n%s", victim, lr.out(before), lr.out(after))

		flows := lr.pollEvidence(victim, "ss -tn", 10, 2*time.Second)
		healthyFlows := lr.run(other, "ss -tn")
		decoy := lr.run(victim, "ip -br link")
		return verdicts{
			right:  answer{"switch-congestion", loc{"port": victim}},
			counts: []ref{flows},
			// Unrelated output, one snapshot of the counters (a rate needs two, which the
			// grader cannot compare) and the healthy job node's connections earn nothing.
			countsNot:  []ref{decoy, after, healthyFlows},
			wrongAt:    []loc{{"port": other}},
			wrongClass: []answer{{"nic-rate-limited", loc{"node": victim, "nic": "rdma0"}}},
		}
	})
}
