package chapters

import (
	"testing"
	"time"
)

// TestLabCh06BootstrapBlocked runs chapter 6's lab with a scripted learner: one node's
// firewall drops inbound TCP to unprivileged ports, so NCCL's bootstrap never completes.
// The learner finds the failing rank in train.log, sees that ICMP works and TCP does
// not, reads the nftables rule, and removes it.
func TestLabCh06BootstrapBlocked(t *testing.T) {
	// Seed 2 blocks node1, the bootstrap root (every other rank is missing); seed 1 blocks
	// node3 (one rank is missing).
	PlaySeeds(t, "ch06-bootstrap-blocked", []uint64{2, 1}, ch06BootstrapBlocked)
}

func ch06BootstrapBlocked(lr *Learner) Verdicts {
	node := lr.V("node")
	lr.T.Logf("variant: node=%s", node)
	// peer: a node to probe from the faulty one; other: a healthy node that is not peer.
	healthy := Others(node, FourNodes...)
	peer, other := healthy[0], healthy[1]

	// The log shows the failing rank: poll until a faulted run has written it.
	failure := lr.PollEvidence("node1", "grep 'Test NCCL failure' train.log", 20, 3*time.Second)
	// Bisect by layer on the node: ICMP gets through, TCP does not, and the ruleset says why.
	peerIP := lr.Addr(peer, "eth0")
	lr.Expect(node, "ping -c 3 -i 0.2 -W 1 "+peerIP, " 0% packet loss")
	probe := "timeout 3 bash -c 'echo > /dev/tcp/" + peerIP + "/29500'; echo rc=$?"
	lr.Expect(node, probe, "rc=124")
	lr.Expect(other, probe, "Connection refused")
	rule := lr.Expect(node, "nft list ruleset", "tcp dport 1024-65535")
	decoy := lr.Run(node, "ip -br link")
	return Verdicts{
		Right:      Answer{"bootstrap-port-blocked", Loc{"node": node}},
		Counts:     []Ref{failure, rule},
		CountsNot:  []Ref{decoy},
		WrongAt:    []Loc{{"node": other}},
		WrongClass: []Answer{{Class: "wrong-interface"}},
		// Flushing the ruleset of a healthy node fixes nothing; the node's own, everything.
		BadFix: func() { lr.Run(other, "nft flush ruleset") },
		Fix:    func() { lr.Run(node, "nft flush ruleset") },
	}
}
