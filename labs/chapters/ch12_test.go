package chapters

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
	PlaySeeds(t, "ch12-nic-flap-timeout", []uint64{1, 9}, ch12NICFlap)
}

func ch12NICFlap(lr *Learner) Verdicts {
	node, nic := lr.V("node"), lr.V("nic")
	other := Others(node, "node1", "node4")[0]
	lr.T.Logf("variant: node=%s nic=%s", node, nic)

	// The job's log: poll until a faulted run has timed out.
	timeouts := lr.PollEvidence(other, "grep -e watchdog -e within -e unreachable train.log", 30, 2*time.Second)
	// The link state on the faulty node: down most of the time, so a few tries suffice.
	link := lr.PollEvidence(node, "ip -br link", 20, 2*time.Second)
	cc := "cat /sys/class/net/" + nic + "/carrier_changes"
	changes := lr.Run(node, cc)
	healthyChanges := lr.Run(other, cc)
	if n := lr.Number(changes); n < 3 {
		lr.T.Errorf("%s: carrier_changes of %s is %d, want >= 3", node, nic, n)
	}
	if n := lr.Number(healthyChanges); n != 2 {
		lr.T.Logf("%s: carrier_changes of the healthy %s is %d (2 expected)", other, nic, n)
	}
	// Watching the link for longer than a period shows both states.
	monitor := lr.Run(node, "timeout 35 ip monitor link")
	out := lr.Out(monitor)
	lr.T.Logf("%s: ip monitor link:\n%s", node, out)
	if !strings.Contains(out, nic) || !strings.Contains(out, "state DOWN") || !strings.Contains(out, "state UP") {
		lr.T.Errorf("%s: ip monitor link did not show %s going down and up:\n%s", node, nic, out)
	}
	healthyLink := lr.Run(other, "ip -br link")
	decoy := lr.Run(node, "ip -br addr show dev eth0")
	return Verdicts{
		Right:  Answer{"nic-flapping", Loc{"node": node, "nic": nic}},
		Counts: []Ref{changes, timeouts, link, monitor},
		// A healthy node's link state and counter earn nothing.
		CountsNot: []Ref{decoy, healthyLink, healthyChanges},
		// The wrong node, the wrong NIC, or "down" instead of "flapping" fails.
		WrongAt:    []Loc{{"node": other, "nic": nic}, {"node": node, "nic": OtherRail[nic]}},
		WrongClass: []Answer{{Class: "nic-down"}},
	}
}
