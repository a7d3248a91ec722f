package chapters

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// EightNodes are the nodes of the 8x1 topology.
var EightNodes = []string{"node1", "node2", "node3", "node4", "node5", "node6", "node7", "node8"}

// TestLabCh25PreflightOneBad runs chapter 25's lab with a scripted learner: one node of
// eight has a smaller MTU on rdma0. The learner runs the same pre-flight check on every
// node (state, MTU, full-size don't-fragment ping to the next node in a ring): the seven
// healthy nodes pass it, the bad one fails it.
func TestLabCh25PreflightOneBad(t *testing.T) {
	PlaySeeds(t, "ch25-preflight-one-bad", []uint64{25}, func(lr *Learner) Verdicts {
		node, mtu := lr.V("node"), lr.V("mtu")
		lr.T.Logf("variant: node=%s mtu=%s", node, mtu)

		var failed []string
		for i, n := range EightNodes {
			next := EightNodes[(i+1)%len(EightNodes)]
			out := lr.Out(lr.Run(n, preflight(lr.Addr(next, "rdma0"))))
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

		healthy := Others(node, EightNodes...)
		peer := healthy[0]
		fullSize := "ping -c 2 -i 0.2 -W 1 -M do -s 1472 "
		link := lr.Expect(node, "ip link show dev rdma0", "mtu "+mtu+" ")
		sysfs := lr.Expect(node, "cat /sys/class/net/rdma0/mtu", mtu)
		fromNode := lr.Expect(node, fullSize+lr.Addr(peer, "rdma0"), "message too long, mtu="+mtu)
		toNode := lr.Expect(peer, fullSize+lr.Addr(node, "rdma0"), " 0 received, 100% packet loss")
		healthyLink := lr.Expect(peer, "ip link show dev rdma0", "mtu 1500 ")
		healthySysfs := lr.Run(peer, "cat /sys/class/net/rdma0/mtu")
		healthyPing := lr.Expect(peer, fullSize+lr.Addr(healthy[1], "rdma0"), " 0% packet loss")
		defaultPing := lr.Expect(peer, "ping -c 2 -i 0.2 -W 1 "+lr.Addr(node, "rdma0"), " 0% packet loss")
		// Output that looks like the evidence but was printed, not measured.
		decoy := lr.Run(node, "echo 'rdma0: <BROADCAST,UP> mtu "+mtu+" qdisc' # ip link")
		return Verdicts{
			Right:      Answer{"mtu-mismatch", Loc{"node": node, "nic": "rdma0"}},
			Counts:     []Ref{link, sysfs, fromNode, toNode},
			CountsNot:  []Ref{healthyLink, healthySysfs, healthyPing, defaultPing, decoy},
			WrongAt:    []Loc{{"node": peer, "nic": "rdma0"}, {"node": node, "nic": "eth0"}},
			WrongClass: []Answer{{Class: "nic-down"}},
		}
	})
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
