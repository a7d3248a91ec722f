package main

import (
	"regexp"
	"testing"
	"time"
)

var wrongDataByte = regexp.MustCompile(`wrong data byte #\d+ should be 0x[0-9a-f]+ but was 0x[0-9a-f]+`)

// TestLabCh12SilentCorruption runs chapter 12's silent-corruption lab with a scripted
// learner: one node's NIC on one rail flips payload bits of a few percent of what it
// receives, checksums fixed. The learner reads the failed result check (#wrong) in
// train.log and the training loss gone inf/nan before it, pings with a data pattern through the bad link (wrong data byte) and
// through a healthy one (clean), confirms the tc filter on the node, and removes it.
// The lab's self-test (the -c 1 workload must fail) proves the corruption reached the
// results before anything here runs.
func TestLabCh12SilentCorruption(t *testing.T) {
	// Seed 1 and 9: different nodes and rails (logged).
	playSeeds(t, "ch12-silent-corruption", []uint64{1, 9}, func(lr *learner) verdicts {
		node, nic := lr.v("node"), lr.v("nic")
		lr.t.Logf("variant: node=%s nic=%s percent=%s", node, nic, lr.v("percent"))
		healthy := others(node, fourNodes...)
		a, b := healthy[0], healthy[1]

		wrong := lr.pollEvidence(a, "grep -e '#wrong' -A3 -e 'Out of bounds' train.log", 30, 2*time.Second)
		// The training before the benchmark diverged: a flipped exponent bit in the summed gradient.
		diverged := lr.pollEvidence(a, "grep -m3 -E 'loss (nan|-?inf)|loss [0-9.]+e[+]' train.log", 30, 2*time.Second)
		ping := func(from, to, via string) ref {
			return lr.run(from, "ping -c 300 -i 0.01 -s 1400 -p a5 "+lr.addr(to, via))
		}
		bad := ping(a, node, nic)
		for try := 0; !wrongDataByte.MatchString(lr.out(bad)) && try < 3; try++ {
			bad = ping(a, node, nic) // 300 echoes through a 3-5 % corruption: a miss is rare
		}
		if !wrongDataByte.MatchString(lr.out(bad)) {
			lr.t.Errorf("ping through %s's %s showed no wrong data:\n%s", node, nic, lr.out(bad))
		}
		good := ping(a, b, nic)
		if wrongDataByte.MatchString(lr.out(good)) {
			lr.t.Errorf("ping between healthy %s and %s showed wrong data:\n%s", a, b, lr.out(good))
		}
		otherNIC := ping(a, node, otherRail[nic])
		if wrongDataByte.MatchString(lr.out(otherNIC)) {
			lr.t.Errorf("ping to %s's healthy %s showed wrong data:\n%s", node, otherRail[nic], lr.out(otherNIC))
		}
		filter := lr.expect(node, "tc filter show dev "+nic+" ingress", "direct-action")
		decoy := lr.run(node, "ip -s link show dev "+nic)
		return verdicts{
			right:     answer{"link-corruption", loc{"node": node, "nic": nic}},
			counts:    []ref{wrong, diverged, bad, filter},
			countsNot: []ref{good, otherNIC, decoy},
			// The wrong node, the right node's other rail, or "loss" instead of corruption fails.
			wrongAt:    []loc{{"node": a, "nic": nic}, {"node": node, "nic": otherRail[nic]}},
			wrongClass: []answer{{class: "link-loss"}},
			// Removing what acts on the NIC's sending side leaves the receiving side's filter.
			badFix: func() { lr.run(node, "tc filter del dev "+nic+" egress") },
			fix:    func() { lr.run(node, "tc qdisc del dev "+nic+" clsact") },
		}
	})
}
