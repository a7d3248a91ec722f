package chapters

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/grader"
)

// TestLabCh28NoisyTenant runs chapter 28's lab with a scripted learner: tenant B's two
// nodes push UDP streams into the rail0 switch port of one of tenant A's job nodes. The
// learner finds the flows with ss on the receiving and on a sending node, then
// rate-limits both senders' rdma0 with tc. Both tenants are measured again: the same
// limit on the senders' other rail fixes nothing for A, and blocking B at its source
// with nft brings A back but leaves B nothing, which is not isolating it.
func TestLabCh28NoisyTenant(t *testing.T) {
	PlaySeeds(t, "ch28-noisy-tenant", []uint64{28, 3}, func(lr *Learner) Verdicts {
		victim := lr.V("victim")
		peer := Others(victim, "node1", "node2")[0]
		lr.T.Logf("variant: victim=%s rate=%s", victim, lr.V("rate"))

		lr.T.Logf("job log: %s", lr.Out(lr.Run("node1", "grep -h -m 2 -e 'Got completion' -e 'Avg bus' train.log")))
		recv := lr.PollEvidence(victim, "ss -tun", 20, 3*time.Second)
		send := lr.PollEvidence("node4", "ss -tun", 20, 3*time.Second)
		// The job's own flows on the other job node show no foreign stream; neither do the
		// victim's counters on their own, nor output that was typed rather than measured.
		peerFlows := lr.Run(peer, "ss -tun")
		counters := lr.Run(victim, "ip -s link show dev rdma0")
		decoy := lr.Run(peer, "echo 'udp ESTAB 0 0 198.18.0.65:5301 198.18.0.68:40000' # ss -tun")
		limit := "tc qdisc replace dev rdma0 root tbf rate 10mbit burst 32kb latency 50ms && tc qdisc show dev rdma0"
		block := "nft add table netdev iso && nft add chain netdev iso out '{ type filter hook egress device rdma0 priority 0; }' && " +
			"nft add rule netdev iso out udp dport 5301-5302 drop && nft list table netdev iso"
		return Verdicts{
			Right:     Answer{"switch-congestion", Loc{"port": victim}},
			Counts:    []Ref{recv, send},
			CountsNot: []Ref{peerFlows, counters, decoy},
			WrongAt:   []Loc{{"port": peer}},
			// The job's retry-exceeded errors suggest RoCE loss on a NIC; the loss is the port's.
			WrongClass: []Answer{{Class: "roce-loss", Loc: Loc{"node": victim, "nic": "rdma0"}},
				{Class: "nic-rate-limited", Loc: Loc{"node": victim, "nic": "rdma0"}}},
			// First a limit on tenant B's nodes, but on the wrong rail: rail0 stays full.
			// (Dropping the streams on A's node is no robust bad fix: in one run the job
			// measured healthy after it.) Then B blocked on rail0 at its source, once the
			// self-test has measured the fault: A is back, B delivers nothing, which earns
			// nothing. The drop sits on the egress hook, past which a lost packet is no
			// error to the UDP sender (the output hook's drop ends iperf3 with EPERM).
			BadFix: func() {
				lr.Expect("node3", strings.ReplaceAll(limit, "rdma0", "rdma1"), "qdisc tbf")
				lr.Expect("node4", strings.ReplaceAll(limit, "rdma0", "rdma1"), "qdisc tbf")
				lr.assertFixDoesNotFix(recv)
				lr.Expect("node3", block, "drop")
				lr.Expect("node4", block, "drop")
				r, err := lr.Lab.Check(context.Background(), grader.Diagnosis{Class: "switch-congestion",
					Location: map[string]string{"port": victim}, Evidence: []grader.EvidenceRef{recv}})
				if err != nil {
					lr.T.Fatalf("check with tenant B blocked: %v", err)
				}
				lr.T.Logf("with tenant B blocked: %+v", r)
				if i := slices.IndexFunc(r.Criteria, func(c grader.Criterion) bool { return c.Name == "remediation" }); i < 0 || r.Criteria[i].Key != "grade.fix.blocked" {
					lr.T.Errorf("blocking tenant B was not graded as a block: %+v", r)
				}
			},
			Fix: func() {
				lr.Expect("node3", "nft delete table netdev iso && "+limit, "qdisc tbf")
				lr.Expect("node4", "nft delete table netdev iso && "+limit, "qdisc tbf")
			},
		}
	})
}
