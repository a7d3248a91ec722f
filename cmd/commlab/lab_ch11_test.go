package main

import (
	"regexp"
	"strconv"
	"testing"
)

// TestLabCh11PairwiseBadRail runs chapter 11's lab with a scripted learner: one node's
// NIC on one rail is throttled in both directions. The learner measures a pair that
// includes the bad node on the bad rail (slow) and a pair of healthy nodes on the same
// rail (fast) with iperf3, confirms with tc, and fixes both directions.
func TestLabCh11PairwiseBadRail(t *testing.T) {
	// Seed 9: node2's rdma1 at 40 Mbit/s.
	playLab(t, "ch11-pairwise-bad-rail", 9, func(lr *learner) verdicts {
		node, nic := lr.v("node"), lr.v("nic")
		lr.t.Logf("variant: node=%s nic=%s rate=%s", node, nic, lr.v("rate"))
		healthy := others(node, fourNodes...)
		a, b, c := healthy[0], healthy[1], healthy[2]

		// Servers on the bad node and on a healthy one, as the learner would start them.
		lr.run(node, "iperf3 -s -D")
		lr.run(b, "iperf3 -s -D")
		badIP, goodIP := lr.addr(node, nic), lr.addr(b, nic)
		slowPair, slow := ch11Iperf(lr, a, badIP)
		fastPair, fast := ch11Iperf(lr, c, goodIP)
		if slow >= 100 || fast < 100 {
			lr.t.Errorf("pairs: with the bad node %.1f Mbit/s (want < 100), healthy pair %.1f Mbit/s (want >= 100)", slow, fast)
		}
		shaper := lr.run(node, "tc -s qdisc show dev "+nic)
		decoy := lr.run(node, "ip -br link")
		return verdicts{
			right:  answer{"nic-rate-limited", loc{"node": node, "nic": nic}},
			counts: []ref{slowPair, shaper},
			// The healthy pair's measurement earns nothing.
			countsNot: []ref{fastPair, decoy},
			// The wrong node, or the right node on the wrong rail, fails.
			wrongAt: []loc{{"node": a, "nic": nic}, {"node": node, "nic": otherRail[nic]}},
			// Half a fix: the outbound shaper put back, the inbound one left in place. The
			// whole fix removes the inbound one too.
			badFix: func() {
				lr.run(node, "tc qdisc replace dev "+nic+" root handle c1: tbf rate 200mbit burst 250kb latency 25ms")
			},
			fix: func() { lr.run(node, "tc qdisc del dev "+nic+" clsact") },
		}
	})
}

var iperfReceiverRate = regexp.MustCompile(`([\d.]+) ([KM]?)bits/sec\s+receiver`)

// ch11Iperf measures from one node to ip with iperf3 and returns the receiver's rate
// in Mbit/s.
func ch11Iperf(lr *learner, from, ip string) (ref, float64) {
	lr.t.Helper()
	c := lr.run(from, "iperf3 -c "+ip+" -t 3")
	out := lr.out(c)
	m := iperfReceiverRate.FindStringSubmatch(out)
	if m == nil {
		lr.t.Fatalf("%s: no receiver line in:\n%s", from, out)
	}
	x, _ := strconv.ParseFloat(m[1], 64)
	if m[2] == "K" {
		x /= 1000
	}
	lr.t.Logf("%s -> %s: %.1f Mbit/s\n%s", from, ip, x, out)
	return c, x
}
