package chapters

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
	PlaySeeds(t, "ch12-silent-corruption", []uint64{1, 9}, func(lr *Learner) Verdicts {
		node, nic := lr.V("node"), lr.V("nic")
		lr.T.Logf("variant: node=%s nic=%s percent=%s", node, nic, lr.V("percent"))
		healthy := Others(node, FourNodes...)
		a, b := healthy[0], healthy[1]

		wrong := lr.PollEvidence(a, "grep -e '#wrong' -A3 -e 'Out of bounds' train.log", 30, 2*time.Second)
		// The training before the benchmark diverged: a flipped exponent bit in the summed gradient.
		diverged := lr.PollEvidence(a, "grep -m3 -E 'loss (nan|-?inf)|loss [0-9.]+e[+]' train.log", 30, 2*time.Second)
		ping := func(from, to, via string) Ref {
			return lr.Run(from, "ping -c 300 -i 0.01 -s 1400 -p a5 "+lr.Addr(to, via))
		}
		bad := ping(a, node, nic)
		for try := 0; !wrongDataByte.MatchString(lr.Out(bad)) && try < 3; try++ {
			bad = ping(a, node, nic) // 300 echoes through a 3-5 % corruption: a miss is rare
		}
		if !wrongDataByte.MatchString(lr.Out(bad)) {
			lr.T.Errorf("ping through %s's %s showed no wrong data:\n%s", node, nic, lr.Out(bad))
		}
		good := ping(a, b, nic)
		if wrongDataByte.MatchString(lr.Out(good)) {
			lr.T.Errorf("ping between healthy %s and %s showed wrong data:\n%s", a, b, lr.Out(good))
		}
		otherNIC := ping(a, node, OtherRail[nic])
		if wrongDataByte.MatchString(lr.Out(otherNIC)) {
			lr.T.Errorf("ping to %s's healthy %s showed wrong data:\n%s", node, OtherRail[nic], lr.Out(otherNIC))
		}
		filter := lr.Expect(node, "tc filter show dev "+nic+" ingress", "direct-action")
		decoy := lr.Run(node, "ip -s link show dev "+nic)
		return Verdicts{
			Right:     Answer{"link-corruption", Loc{"node": node, "nic": nic}},
			Counts:    []Ref{wrong, diverged, bad, filter},
			CountsNot: []Ref{good, otherNIC, decoy},
			// The wrong node, the right node's other rail, or "loss" instead of corruption fails.
			WrongAt:    []Loc{{"node": a, "nic": nic}, {"node": node, "nic": OtherRail[nic]}},
			WrongClass: []Answer{{Class: "link-loss"}},
			// Removing what acts on the NIC's sending side leaves the receiving side's filter.
			BadFix: func() { lr.Run(node, "tc filter del dev "+nic+" egress") },
			Fix:    func() { lr.Run(node, "tc qdisc del dev "+nic+" clsact") },
		}
	})
}
