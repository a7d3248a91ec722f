package main

import (
	"testing"
	"time"
)

// TestLabCh09RoCESilentRetransmit runs chapter 9's second lab with a scripted learner:
// one node drops a few per cent of the RoCE (UDP 4791) packets one of its NICs receives.
// The job does not fail; ping is clean. The learner finds the QP with tens of thousands
// of retransmissions in train.log, then the node's rule, and removes it.
func TestLabCh09RoCESilentRetransmit(t *testing.T) {
	playSeeds(t, "ch09-roce-silent-retransmit", []uint64{3, 6}, ch09SilentRetransmit)
}

func ch09SilentRetransmit(lr *learner) verdicts {
	node, nic := lr.v("node"), lr.v("nic")
	lr.t.Logf("variant: node=%s nic=%s percent=%s", node, nic, lr.v("percent"))
	healthy := others(node, fourNodes...)
	peer, other := healthy[0], healthy[1]

	// The job's QP counters: poll until a faulted run has printed them.
	qps := lr.pollEvidence(peer, "grep 'QP to rank' train.log | grep -v ' 0 retransmitted'", 20, 3*time.Second)
	// ping is clean on the faulty NIC: the loss is RoCE only.
	lr.expect(peer, "ping -c 20 -i 0.2 -W 1 "+lr.addr(node, nic), " 0% packet loss")
	rule := lr.expect(node, "nft list ruleset", "udp dport 4791")
	healthyRules := lr.run(other, "nft list ruleset")
	decoy := lr.run(node, "ip -br link")
	return verdicts{
		right:  answer{"roce-loss", loc{"node": node, "nic": nic}},
		counts: []ref{rule, qps},
		// A healthy node's (empty) ruleset earns nothing.
		countsNot: []ref{decoy, healthyRules},
		// The wrong node, the other rail of the right node, and plain link loss all fail.
		wrongAt:    []loc{{"node": other, "nic": nic}, {"node": node, "nic": otherRail[nic]}},
		wrongClass: []answer{{class: "link-loss"}},
		// Flushing a healthy node's ruleset fixes nothing.
		badFix: func() { lr.run(other, "nft flush ruleset") },
		fix:    func() { lr.run(node, "nft flush ruleset") },
	}
}
