package chapters

import (
	"testing"
	"time"
)

// TestLabCh02ByteBudget runs chapter 2's lab with a scripted learner: foreign flows
// land on one job node's switch port. The learner compares the rdma0 byte counters of
// the two job nodes with the all_reduce's byte budget and lists the flows with ss.
func TestLabCh02ByteBudget(t *testing.T) {
	Play(t, "ch02-byte-budget", 1, func(lr *Learner) Verdicts {
		victim := lr.V("victim")
		other := Others(victim, "node1", "node2")[0]
		lr.T.Logf("variant: victim=%s rate=%s", victim, lr.V("rate"))

		stats := "ip -s link show dev rdma0"
		before := lr.Run(victim, stats)
		lr.Run(other, stats)
		time.Sleep(3 * time.Second)
		after := lr.Run(victim, stats)
		lr.Run(other, stats)
		lr.T.Logf("%s rdma0:\n%s\n%s", victim, lr.Out(before), lr.Out(after))

		flows := lr.PollEvidence(victim, "ss -tn", 10, 2*time.Second)
		healthyFlows := lr.Run(other, "ss -tn")
		decoy := lr.Run(victim, "ip -br link")
		return Verdicts{
			Right:  Answer{"switch-congestion", Loc{"port": victim}},
			Counts: []Ref{flows},
			// Unrelated output, one snapshot of the counters (a rate needs two, which the
			// grader cannot compare) and the healthy job node's connections earn nothing.
			CountsNot:  []Ref{decoy, after, healthyFlows},
			WrongAt:    []Loc{{"port": other}},
			WrongClass: []Answer{{"nic-rate-limited", Loc{"node": victim, "nic": "rdma0"}}},
		}
	})
}
