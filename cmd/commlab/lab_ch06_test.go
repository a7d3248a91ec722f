package main

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
	playSeeds(t, "ch06-bootstrap-blocked", []uint64{2, 1}, ch06BootstrapBlocked)
}

func ch06BootstrapBlocked(lr *learner) verdicts {
	node := lr.v("node")
	lr.t.Logf("variant: node=%s", node)
	// peer: a node to probe from the faulty one; other: a healthy node that is not peer.
	healthy := others(node, fourNodes...)
	peer, other := healthy[0], healthy[1]

	// The log shows the failing rank: poll until a faulted run has written it.
	failure := lr.pollEvidence("node1", "grep 'Test NCCL failure' train.log", 20, 3*time.Second)
	// Bisect by layer on the node: ICMP gets through, TCP does not, and the ruleset says why.
	peerIP := lr.addr(peer, "eth0")
	lr.expect(node, "ping -c 3 -i 0.2 -W 1 "+peerIP, " 0% packet loss")
	probe := "timeout 3 bash -c 'echo > /dev/tcp/" + peerIP + "/29500'; echo rc=$?"
	lr.expect(node, probe, "rc=124")
	lr.expect(other, probe, "Connection refused")
	rule := lr.expect(node, "nft list ruleset", "tcp dport 1024-65535")
	decoy := lr.run(node, "ip -br link")
	return verdicts{
		right:      answer{"bootstrap-port-blocked", loc{"node": node}},
		counts:     []ref{failure, rule},
		countsNot:  []ref{decoy},
		wrongAt:    []loc{{"node": other}},
		wrongClass: []answer{{class: "wrong-interface"}},
		// Flushing the ruleset of a healthy node fixes nothing; the node's own, everything.
		badFix: func() { lr.run(other, "nft flush ruleset") },
		fix:    func() { lr.run(node, "nft flush ruleset") },
	}
}
