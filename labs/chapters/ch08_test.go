package chapters

import (
	"testing"
	"time"
)

// TestLabCh08MTUMismatch runs chapter 8's MTU lab with a scripted learner: one node's
// rdma0 has a smaller MTU than the rest of rail0. The default ping passes; a full-size
// ping with the don't-fragment bit to that node is lost, and the same ping from that
// node is refused by its own MTU. The learner reads the MTU with ip link and sets it
// back to 1500.
func TestLabCh08MTUMismatch(t *testing.T) {
	// Seed 1 and seed 4 draw different nodes and MTUs (logged below).
	PlaySeeds(t, "ch08-mtu-mismatch", []uint64{1, 4}, ch08MTUMismatch)
}

func ch08MTUMismatch(lr *Learner) Verdicts {
	node, mtu := lr.V("node"), lr.V("mtu")
	lr.T.Logf("variant: node=%s mtu=%s", node, mtu)
	// peer and other: two healthy nodes.
	healthy := Others(node, FourNodes...)
	peer, other := healthy[0], healthy[1]

	// The fault shows in the job: senders to the node give up with IBV_WC_RETRY_EXC_ERR (12).
	lr.Poll(peer, "grep 'Got completion' train.log", 20, 3*time.Second, Printed("IBV_WC_RETRY_EXC_ERR(12)"))

	nodeIP, otherIP, peerIP := lr.Addr(node, "rdma0"), lr.Addr(other, "rdma0"), lr.Addr(peer, "rdma0")
	// The default ping passes everywhere: it is the trap of this lab.
	lr.Expect(peer, "ping -c 3 -i 0.2 -W 1 "+nodeIP, " 0% packet loss")
	// Full size, don't fragment: lost towards the node, refused on the node, fine elsewhere.
	fullSize := "ping -c 3 -i 0.2 -W 1 -M do -s 1472 "
	toNode := lr.Expect(peer, fullSize+nodeIP, " 0 received, 100% packet loss")
	fromNode := lr.Expect(node, fullSize+peerIP, "message too long, mtu="+mtu)
	healthyPing := lr.Expect(peer, fullSize+otherIP, " 0% packet loss")
	// The MTU itself, and the frames its NIC dropped.
	link := lr.Expect(node, "ip link show dev rdma0", "mtu "+mtu+" ")
	lr.Expect(node, "ip -s link show dev rdma0", "dropped")
	healthyLink := lr.Expect(other, "ip link show dev rdma0", "mtu 1500 ")
	decoy := lr.Run(node, "ip -br link")
	return Verdicts{
		Right:     Answer{"mtu-mismatch", Loc{"node": node, "nic": "rdma0"}},
		Counts:    []Ref{link, toNode, fromNode},
		CountsNot: []Ref{decoy, healthyLink, healthyPing},
		WrongAt:   []Loc{{"node": other, "nic": "rdma0"}},
		// The class the symptom suggests (RoCE loss) fails.
		WrongClass: []Answer{{Class: "roce-loss"}},
		// Setting a healthy node's MTU to 1500 again changes nothing. The real fix: the
		// node's MTU back to the plan; then full-size pings pass.
		BadFix: func() { lr.Run(other, "ip link set dev rdma0 mtu 1500") },
		Fix: func() {
			lr.Run(node, "ip link set dev rdma0 mtu 1500")
			lr.Expect(peer, fullSize+nodeIP, " 0% packet loss")
		},
	}
}
