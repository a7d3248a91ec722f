package chapters

import (
	"strings"
	"testing"
	"time"
)

// TestLabCh28NoisyTenant runs chapter 28's lab with a scripted learner: tenant B's two
// nodes push UDP streams into the rail0 switch port of one of tenant A's job nodes. The
// learner finds the flows with ss on the receiving and on a sending node, then
// rate-limits both senders' rdma0 with tc. The same limit on the senders' other rail
// fixes nothing.
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
		return Verdicts{
			Right:     Answer{"switch-congestion", Loc{"port": victim}},
			Counts:    []Ref{recv, send},
			CountsNot: []Ref{peerFlows, counters, decoy},
			WrongAt:   []Loc{{"port": peer}},
			// The job's retry-exceeded errors suggest RoCE loss on a NIC; the loss is the port's.
			WrongClass: []Answer{{Class: "roce-loss", Loc: Loc{"node": victim, "nic": "rdma0"}},
				{Class: "nic-rate-limited", Loc: Loc{"node": victim, "nic": "rdma0"}}},
			// Tenant B's nodes, but the wrong rail: rail0 stays full. (Dropping the streams on
			// A's node is no robust bad fix: in one run the job measured healthy after it.)
			BadFix: func() {
				lr.Expect("node3", strings.ReplaceAll(limit, "rdma0", "rdma1"), "qdisc tbf")
				lr.Expect("node4", strings.ReplaceAll(limit, "rdma0", "rdma1"), "qdisc tbf")
			},
			Fix: func() {
				lr.Expect("node3", limit, "qdisc tbf")
				lr.Expect("node4", limit, "qdisc tbf")
			},
		}
	})
}
