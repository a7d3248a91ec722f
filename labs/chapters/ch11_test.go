package chapters

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
	Play(t, "ch11-pairwise-bad-rail", 9, func(lr *Learner) Verdicts {
		node, nic := lr.V("node"), lr.V("nic")
		lr.T.Logf("variant: node=%s nic=%s rate=%s", node, nic, lr.V("rate"))
		healthy := Others(node, FourNodes...)
		a, b, c := healthy[0], healthy[1], healthy[2]

		// Servers on the bad node and on a healthy one, as the learner would start them.
		lr.Run(node, "iperf3 -s -D")
		lr.Run(b, "iperf3 -s -D")
		badIP, goodIP := lr.Addr(node, nic), lr.Addr(b, nic)
		slowPair, slow := ch11Iperf(lr, a, badIP)
		fastPair, fast := ch11Iperf(lr, c, goodIP)
		if slow >= 100 || fast < 100 {
			lr.T.Errorf("pairs: with the bad node %.1f Mbit/s (want < 100), healthy pair %.1f Mbit/s (want >= 100)", slow, fast)
		}
		shaper := lr.Run(node, "tc -s qdisc show dev "+nic)
		decoy := lr.Run(node, "ip -br link")
		return Verdicts{
			Right:  Answer{"nic-rate-limited", Loc{"node": node, "nic": nic}},
			Counts: []Ref{slowPair, shaper},
			// The healthy pair's measurement earns nothing.
			CountsNot: []Ref{fastPair, decoy},
			// The wrong node, or the right node on the wrong rail, fails.
			WrongAt: []Loc{{"node": a, "nic": nic}, {"node": node, "nic": OtherRail[nic]}},
			// Half a fix: the outbound shaper put back, the inbound one left in place. The
			// whole fix removes the inbound one too.
			BadFix: func() {
				lr.Run(node, "tc qdisc replace dev "+nic+" root handle c1: tbf rate 200mbit burst 250kb latency 25ms")
			},
			Fix: func() { lr.Run(node, "tc qdisc del dev "+nic+" clsact") },
		}
	})
}

var iperfReceiverRate = regexp.MustCompile(`([\d.]+) ([KM]?)bits/sec\s+receiver`)

// ch11Iperf measures from one node to ip with iperf3 and returns the receiver's rate
// in Mbit/s.
func ch11Iperf(lr *Learner, from, ip string) (Ref, float64) {
	lr.T.Helper()
	c := lr.Run(from, "iperf3 -c "+ip+" -t 3")
	out := lr.Out(c)
	m := iperfReceiverRate.FindStringSubmatch(out)
	if m == nil {
		lr.T.Fatalf("%s: no receiver line in:\n%s", from, out)
	}
	x, _ := strconv.ParseFloat(m[1], 64)
	if m[2] == "K" {
		x /= 1000
	}
	lr.T.Logf("%s -> %s: %.1f Mbit/s\n%s", from, ip, x, out)
	return c, x
}
