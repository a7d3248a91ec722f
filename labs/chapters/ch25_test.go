package chapters

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/commlab/commlab/grader"
)

// EightNodes are the nodes of the 8x1 topology.
var EightNodes = []string{"node1", "node2", "node3", "node4", "node5", "node6", "node7", "node8"}

// TestLabCh25PreflightOneBad runs chapter 25's lab with a scripted learner: one node of
// eight has a smaller MTU on rdma0. The learner runs the same pre-flight check on every
// node (state, MTU, full-size don't-fragment ping to the next node in a ring): the seven
// healthy nodes pass it, the bad one fails it. The evidence is graded on both halves:
// the check cited on the bad node alone earns half the credit, with the same check cited
// passing on three or more healthy nodes all of it.
func TestLabCh25PreflightOneBad(t *testing.T) {
	PlaySeeds(t, "ch25-preflight-one-bad", []uint64{25}, func(lr *Learner) Verdicts {
		node, mtu := lr.V("node"), lr.V("mtu")
		lr.T.Logf("variant: node=%s mtu=%s", node, mtu)
		addr := map[string]string{}
		for _, n := range EightNodes {
			addr[n] = lr.Addr(n, "rdma0")
		}
		next := func(i int) string { return EightNodes[(i+1)%len(EightNodes)] }

		var failed []string
		for i, n := range EightNodes {
			out := lr.Out(lr.Run(n, preflight(addr[next(i)])))
			lr.T.Logf("check on %s:\n%s", n, out)
			if strings.Contains(out, "FAIL") {
				failed = append(failed, n)
			} else if !strings.Contains(out, "PASS mtu=1500") || !strings.Contains(out, "PASS frame") {
				lr.T.Fatalf("check on %s printed neither verdict:\n%s", n, out)
			}
		}
		// The node's own check fails (its MTU, its outgoing frames) and so does the check of
		// the node before it in the ring (its frames to the node are lost).
		prev := EightNodes[(slices.Index(EightNodes, node)+len(EightNodes)-1)%len(EightNodes)]
		if fmt.Sprint(failed) != fmt.Sprint(sortedPair(prev, node)) {
			lr.T.Fatalf("the check failed on %v, want exactly %s and %s", failed, prev, node)
		}

		// The same check as plain commands on every node, the form that can be cited.
		fullSize := "ping -c 2 -i 0.2 -W 1 -M do -s 1472 "
		links, sysfs, ring := map[string]Ref{}, map[string]Ref{}, map[string]Ref{}
		for i, n := range EightNodes {
			m := "1500"
			if n == node {
				m = mtu
			}
			links[n] = lr.Expect(n, "ip link show dev rdma0", "mtu "+m+" ")
			sysfs[n] = lr.Expect(n, "cat /sys/class/net/rdma0/mtu", m)
			want := " 0% packet loss"
			switch n {
			case node:
				want = "message too long, mtu=" + mtu
			case prev:
				want = " 0 received, 100% packet loss"
			}
			ring[n] = lr.Expect(n, fullSize+addr[next(i)], want)
		}
		healthy := Others(node, EightNodes...)
		peer := healthy[0]
		at := func(refs map[string]Ref, nodes ...string) []Ref {
			out := make([]Ref, len(nodes))
			for i, n := range nodes {
				out[i] = refs[n]
			}
			return out
		}
		passed := Others(prev, healthy...) // healthy nodes whose ring ping passed
		toNode := lr.Expect(peer, fullSize+addr[node], " 0 received, 100% packet loss")
		healthyPing := lr.Expect(peer, fullSize+addr[healthy[1]], " 0% packet loss")
		defaultPing := lr.Expect(peer, "ping -c 2 -i 0.2 -W 1 "+addr[node], " 0% packet loss")
		eth0 := map[string]Ref{}
		for _, n := range healthy[:3] {
			eth0[n] = lr.Run(n, "cat /sys/class/net/eth0/mtu")
		}
		// Output that looks like the evidence but was printed, not measured.
		decoy := lr.Run(node, "echo 'rdma0: <BROADCAST,UP> mtu "+mtu+" qdisc' # ip link")

		// The healthy half: which citations earn what share of the evidence credit.
		for _, c := range []struct {
			name  string
			cite  []Ref
			share float64
		}{
			{"the check on the bad node only", at(sysfs, node), 0.5},
			{"and on two healthy nodes", at(sysfs, node, healthy[0], healthy[1]), 0.5},
			{"and on three healthy nodes", at(sysfs, node, healthy[0], healthy[1], healthy[2]), 1},
			{"and on all seven", at(sysfs, EightNodes...), 1},
			{"ip link on all eight", at(links, EightNodes...), 1},
			{"ip link with another check passing elsewhere", append(at(links, node), at(sysfs, healthy[:3]...)...), 0.5},
			{"the bad node and eth0 elsewhere", append(at(sysfs, node), at(eth0, healthy[:3]...)...), 0.5},
			{"the bad node's check twice", at(sysfs, node, node, healthy[0], healthy[1]), 0.5},
			{"full-size pings around the ring", at(ring, EightNodes...), 1},
			{"the lost frames and three passing pings", append([]Ref{toNode}, at(ring, passed[1:4]...)...), 1},
			{"healthy nodes only", at(sysfs, healthy...), 0},
		} {
			r := lr.DryCite(lr.Truth(), c.cite...)
			if got := Criterion(r, "evidence") / evidenceWeight(r); math.Abs(got-c.share) > 1e-9 {
				lr.T.Errorf("%s: %.2f of the evidence credit, want %.2f: %+v", c.name, got, c.share, r)
			}
		}

		return Verdicts{
			Right:      Answer{"mtu-mismatch", Loc{"node": node, "nic": "rdma0"}},
			Counts:     []Ref{links[node], sysfs[node], ring[node], ring[prev], toNode},
			CountsNot:  []Ref{links[peer], sysfs[peer], ring[passed[0]], healthyPing, defaultPing, decoy},
			Cite:       at(links, EightNodes...),
			WrongAt:    []Loc{{"node": peer, "nic": "rdma0"}, {"node": node, "nic": "eth0"}},
			WrongClass: []Answer{{Class: "nic-down"}},
		}
	})
}

// evidenceWeight is the weight of a result's evidence criterion.
func evidenceWeight(r grader.Result) float64 {
	for _, c := range r.Criteria {
		if c.Name == "evidence" {
			return c.Weight
		}
	}
	return 1
}

// preflight is the learner's check: one PASS/FAIL line per item of the plan.
func preflight(peerIP string) string {
	return `s=$(cat /sys/class/net/rdma0/operstate); m=$(cat /sys/class/net/rdma0/mtu); ` +
		`[ "$s" = up ] && echo "PASS state=$s" || echo "FAIL state=$s"; ` +
		`[ "$m" = 1500 ] && echo "PASS mtu=$m" || echo "FAIL mtu=$m (plan 1500)"; ` +
		`ping -q -c 2 -i 0.2 -W 1 -M do -s 1472 ` + peerIP + ` >/dev/null 2>&1 && echo "PASS frame 1500 to ` + peerIP + `" || echo "FAIL frame 1500 to ` + peerIP + `"`
}

// sortedPair is a and b in EightNodes order.
func sortedPair(a, b string) []string {
	if slices.Index(EightNodes, a) > slices.Index(EightNodes, b) {
		a, b = b, a
	}
	return []string{a, b}
}
