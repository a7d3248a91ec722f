package main

import (
	"strings"
	"testing"
	"time"
)

// TestLabCh12NICFlapTimeout runs chapter 12's lab with a scripted learner: one node's
// data NIC flaps (24 s down, 6 s up), so the TCP job times out in collectives and at
// connection setup. The learner reads the timeouts in train.log, then finds the node
// whose link keeps changing state (ip link, ip monitor, carrier_changes). The lab has no
// remediation: the learner cannot stop the flapping.
func TestLabCh12NICFlapTimeout(t *testing.T) {
	// Seed 1: node3's rdma0 (the first interface NCCL_SOCKET_IFNAME=rdma matches);
	// seed 9: node2's rdma1.
	playSeeds(t, "ch12-nic-flap-timeout", []uint64{1, 9}, ch12NICFlap)
}

func ch12NICFlap(lr *learner) verdicts {
	node, nic := lr.v("node"), lr.v("nic")
	other := others(node, "node1", "node4")[0]
	lr.t.Logf("variant: node=%s nic=%s", node, nic)

	// The job's log: poll until a faulted run has timed out.
	timeouts := lr.pollEvidence(other, "grep -e watchdog -e within -e unreachable train.log", 30, 2*time.Second)
	// The link state on the faulty node: down most of the time, so a few tries suffice.
	link := lr.pollEvidence(node, "ip -br link", 20, 2*time.Second)
	cc := "cat /sys/class/net/" + nic + "/carrier_changes"
	changes := lr.run(node, cc)
	healthyChanges := lr.run(other, cc)
	if n := lr.number(changes); n < 3 {
		lr.t.Errorf("%s: carrier_changes of %s is %d, want >= 3", node, nic, n)
	}
	if n := lr.number(healthyChanges); n != 2 {
		lr.t.Logf("%s: carrier_changes of the healthy %s is %d (2 expected)", other, nic, n)
	}
	// Watching the link for longer than a period shows both states.
	monitor := lr.run(node, "timeout 35 ip monitor link")
	out := lr.out(monitor)
	lr.t.Logf("%s: ip monitor link:\n%s", node, out)
	if !strings.Contains(out, nic) || !strings.Contains(out, "state DOWN") || !strings.Contains(out, "state UP") {
		lr.t.Errorf("%s: ip monitor link did not show %s going down and up:\n%s", node, nic, out)
	}
	healthyLink := lr.run(other, "ip -br link")
	decoy := lr.run(node, "ip -br addr show dev eth0")
	return verdicts{
		right:  answer{"nic-flapping", loc{"node": node, "nic": nic}},
		counts: []ref{changes, timeouts, link, monitor},
		// A healthy node's link state and counter earn nothing.
		countsNot: []ref{decoy, healthyLink, healthyChanges},
		// The wrong node, the wrong NIC, or "down" instead of "flapping" fails.
		wrongAt:    []loc{{"node": other, "nic": nic}, {"node": node, "nic": otherRail[nic]}},
		wrongClass: []answer{{class: "nic-down"}},
	}
}
