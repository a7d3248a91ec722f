package chapters

import (
	"testing"
	"time"
)

// TestLabCh09RoCESilentRetransmit runs chapter 9's second lab with a scripted learner:
// one node drops a few per cent of the RoCE (UDP 4791) packets one of its NICs receives.
// The job does not fail; ping is clean. The learner finds the QP with tens of thousands
// of retransmissions in train.log, then the node's rule, and removes it.
func TestLabCh09RoCESilentRetransmit(t *testing.T) {
	PlaySeeds(t, "ch09-roce-silent-retransmit", []uint64{3, 6}, ch09SilentRetransmit)
}

func ch09SilentRetransmit(lr *Learner) Verdicts {
	node, nic := lr.V("node"), lr.V("nic")
	lr.T.Logf("variant: node=%s nic=%s percent=%s", node, nic, lr.V("percent"))
	healthy := Others(node, FourNodes...)
	peer, other := healthy[0], healthy[1]

	// The job's QP counters: poll until a faulted run has printed them.
	qps := lr.PollEvidence(peer, "grep 'QP to rank' train.log | grep -v ' 0 retransmitted'", 20, 3*time.Second)
	// ping is clean on the faulty NIC: the loss is RoCE only.
	lr.Expect(peer, "ping -c 20 -i 0.2 -W 1 "+lr.Addr(node, nic), " 0% packet loss")
	rule := lr.Expect(node, "nft list ruleset", "udp dport 4791")
	healthyRules := lr.Run(other, "nft list ruleset")
	decoy := lr.Run(node, "ip -br link")
	return Verdicts{
		Right:  Answer{"roce-loss", Loc{"node": node, "nic": nic}},
		Counts: []Ref{rule, qps},
		// A healthy node's (empty) ruleset earns nothing.
		CountsNot: []Ref{decoy, healthyRules},
		// The wrong node, the other rail of the right node, and plain link loss all fail.
		WrongAt:    []Loc{{"node": other, "nic": nic}, {"node": node, "nic": OtherRail[nic]}},
		WrongClass: []Answer{{Class: "link-loss"}},
		// Flushing a healthy node's ruleset fixes nothing.
		BadFix: func() { lr.Run(other, "nft flush ruleset") },
		Fix:    func() { lr.Run(node, "nft flush ruleset") },
	}
}
