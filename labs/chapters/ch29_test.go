package chapters

import (
	"testing"
	"time"
)

// TestLabCh29RouteAstray runs chapter 29's first incident with a scripted learner: one
// node has more specific routes for the data rail's subnet through the management NIC.
// NCCL's log names rdma0 on both nodes (it listens there; its connects are not bound),
// so the log earns nothing; the routing table, the kernel's answer for the peer's data
// address and the job's connections from the eth0 address do.
func TestLabCh29RouteAstray(t *testing.T) {
	// Seed 29: node1, whose rdma0 address is its subnet's first host; seed 4: node2.
	PlaySeeds(t, "ch29-route-astray", []uint64{29, 4}, func(lr *Learner) Verdicts {
		node := lr.V("node")
		other := Others(node, "node1", "node2")[0]
		lr.T.Logf("variant: node=%s", node)

		peerData, nodeData, peerMgmt := lr.Addr(other, "rdma0"), lr.Addr(node, "rdma0"), lr.Addr(other, "eth0")
		routes := lr.Expect(node, "ip route", "dev eth0 proto 193")
		get := lr.Expect(node, "ip route get "+peerData, peerData+" dev eth0 ")
		// The job's connections exist only while a run is in flight.
		conns := lr.PollEvidence(node, "ss -tn", 40, time.Second)

		// NCCL's own lines say rdma0 on both nodes: true, and no evidence.
		devs := lr.Expect(other, "grep -h 'NET/Socket : Using' train.log", node+":")
		healthyRoutes := lr.Run(other, "ip route")
		healthyGet := lr.Expect(other, "ip route get "+nodeData, nodeData+" dev rdma0 ")
		mgmtGet := lr.Expect(node, "ip route get "+peerMgmt, peerMgmt+" dev eth0 ")
		decoy := lr.Run(node, "echo '"+peerData+" dev eth0 src 198.18.0.1' # ip route get")
		return Verdicts{
			Right:      Answer{"wrong-route", Loc{"node": node}},
			Counts:     []Ref{routes, get, conns},
			CountsNot:  []Ref{devs, healthyRoutes, healthyGet, mgmtGet, decoy},
			WrongAt:    []Loc{{"node": other}},
			WrongClass: []Answer{{Class: "wrong-interface"}, {Class: "nic-rate-limited", Loc: Loc{"node": node, "nic": "eth0"}}},
		}
	})
}

// TestLabCh29FlapError12 runs chapter 29's second incident: one node's rdma0 loses its
// carrier 24 s of every 30 s, and the emulated RoCE job fails now and then, at connection
// setup or with error 12. The symptoms (in the log, from both nodes) earn nothing; the
// link's state and its carrier_changes counter on the faulty node do. The learner
// does not wait for a failure here: the link shows the flap from the first cycle on.
func TestLabCh29FlapError12(t *testing.T) {
	// Seed 4: node2; seed 29: node1.
	PlaySeeds(t, "ch29-flap-error12", []uint64{4, 29}, func(lr *Learner) Verdicts {
		node := lr.V("node")
		other := Others(node, "node1", "node2")[0]
		lr.T.Logf("variant: node=%s", node)

		cc := "cat /sys/class/net/rdma0/carrier_changes"
		changes := lr.PollEvidence(node, cc, 10, time.Second)
		link := lr.PollEvidence(node, "ip -br link", 20, time.Second)
		healthyChanges := lr.Expect(other, cc, "2")
		healthyLink := lr.Expect(other, "ip -br link show dev rdma0", "UP")
		symptom := lr.Run(other, "grep -h -e '==>' -e 'error 12' -e 'NCCL failure' train.log")
		decoy := lr.Run(node, "echo 'rdma0@if7  DOWN' # ip -br link")
		return Verdicts{
			Right:     Answer{"nic-flapping", Loc{"node": node, "nic": "rdma0"}},
			Counts:    []Ref{changes, link},
			CountsNot: []Ref{healthyChanges, healthyLink, symptom, decoy},
			WrongAt:   []Loc{{"node": other, "nic": "rdma0"}},
			// error 12 read as drops, or the flap read as a link that is simply down.
			WrongClass: []Answer{{Class: "roce-loss"}, {Class: "nic-down"}},
		}
	})
}
