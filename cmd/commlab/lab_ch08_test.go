package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/grader"
)

// TestLabCh08MTUMismatch runs chapter 8's MTU lab with a scripted learner: one node's
// rdma0 has a smaller MTU than the rest of rail0. The default ping passes; a full-size
// ping with the don't-fragment bit to that node is lost, and the same ping from that
// node is refused by its own MTU. The learner reads the MTU with ip link and sets it
// back to 1500.
func TestLabCh08MTUMismatch(t *testing.T) {
	// Seed 1 and seed 4 draw different nodes and MTUs (logged below).
	for _, seed := range []uint64{1, 4} {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { ch08MTUMismatch(t, seed) })
	}
}

func ch08MTUMismatch(t *testing.T, seed uint64) {
	l := labFixture(t, "ch08-mtu-mismatch", seed)
	v := l.Variant.Values
	node, mtu := v["node"], v["mtu"]
	t.Logf("variant: node=%s mtu=%s", node, mtu)
	// peer and other: two healthy nodes.
	var healthy []string
	for _, n := range []string{"node1", "node2", "node3", "node4"} {
		if n != node {
			healthy = append(healthy, n)
		}
	}
	peer, other := healthy[0], healthy[1]

	out := func(n string, seq int) string {
		cmds, _ := mustTerm(t, l, n).Commands()
		return cmds[seq-1].Output
	}
	expect := func(n, line, want string) int {
		seq := typeAndWait(t, l, n, line)
		o := out(n, seq)
		t.Logf("%s#%d %s:\n%s", n, seq, line, o)
		if !strings.Contains(o, want) {
			t.Errorf("%s: %q printed %q, want %q", n, line, o, want)
		}
		return seq
	}

	// The fault shows in the job: senders to the node give up with error 12.
	line := "grep 'error 12' train.log"
	for try := 0; ; try++ {
		seq := typeAndWait(t, l, peer, line)
		if o := out(peer, seq); strings.Contains(o, "error 12") || try == 20 {
			t.Logf("%s#%d %s:\n%s", peer, seq, line, o)
			if !strings.Contains(o, "error 12") {
				t.Errorf("the job never failed with error 12")
			}
			break
		}
		time.Sleep(3 * time.Second)
	}

	nodeIP := ch06NodeAddr(t, l, node, "rdma0")
	otherIP := ch06NodeAddr(t, l, other, "rdma0")
	peerIP := ch06NodeAddr(t, l, peer, "rdma0")
	// The default ping passes everywhere: it is the trap of this lab.
	expect(peer, "ping -c 3 -i 0.2 -W 1 "+nodeIP, " 0% packet loss")
	// Full size, don't fragment: lost towards the node, refused on the node, fine elsewhere.
	toNode := expect(peer, "ping -c 3 -i 0.2 -W 1 -M do -s 1472 "+nodeIP, " 0 received, 100% packet loss")
	fromNode := expect(node, "ping -c 3 -i 0.2 -W 1 -M do -s 1472 "+peerIP, "message too long, mtu="+mtu)
	healthyPing := expect(peer, "ping -c 3 -i 0.2 -W 1 -M do -s 1472 "+otherIP, " 0% packet loss")
	// The MTU itself, and the frames its NIC dropped.
	link := expect(node, "ip link show dev rdma0", "mtu "+mtu+" ")
	expect(node, "ip -s link show dev rdma0", "dropped")
	healthyLink := expect(other, "ip link show dev rdma0", "mtu 1500 ")
	decoy := typeAndWait(t, l, node, "ip -br link")

	ts, err := l.Transcripts()
	if err != nil {
		t.Fatal(err)
	}
	dry := func(d grader.Diagnosis, m *grader.Measurement) grader.Result {
		r, err := grader.Grade(grader.Input{Variant: l.Variant, Diagnosis: d, Transcripts: ts, Remediation: m})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	class := "mtu-mismatch"
	loc := map[string]string{"node": node, "nic": "rdma0"}
	real := []grader.EvidenceRef{{Terminal: node, Seq: link}}
	for _, ref := range []grader.EvidenceRef{{Terminal: node, Seq: link}, {Terminal: peer, Seq: toNode}, {Terminal: node, Seq: fromNode}} {
		if r := dry(grader.Diagnosis{Class: class, Location: loc, Evidence: []grader.EvidenceRef{ref}}, nil); criterion(r, "evidence") == 0 {
			t.Errorf("%s#%d earned no evidence credit: %+v", ref.Terminal, ref.Seq, r)
		}
	}
	// (b) unrelated output, a healthy node's MTU and a ping between healthy nodes earn nothing.
	for _, ref := range []grader.EvidenceRef{{Terminal: node, Seq: decoy}, {Terminal: other, Seq: healthyLink}, {Terminal: peer, Seq: healthyPing}} {
		if r := dry(grader.Diagnosis{Class: class, Location: loc, Evidence: []grader.EvidenceRef{ref}}, nil); criterion(r, "evidence") != 0 {
			t.Errorf("(b) %s#%d earned evidence credit: %+v", ref.Terminal, ref.Seq, r)
		}
	}
	// (c) the wrong node fails, and so does the class the symptom suggests (RoCE loss).
	if r := dry(grader.Diagnosis{Class: class, Location: map[string]string{"node": other, "nic": "rdma0"}, Evidence: real}, nil); r.Passed {
		t.Errorf("(c) the wrong location passed: %+v", r)
	}
	if r := dry(grader.Diagnosis{Class: "roce-loss", Location: loc, Evidence: real}, nil); r.Passed {
		t.Errorf("(c) the wrong class passed: %+v", r)
	}
	// (d) setting a healthy node's MTU to 1500 again changes nothing.
	typeAndWait(t, l, other, "ip link set dev rdma0 mtu 1500")
	bw, err := l.Measure(context.Background())
	t.Logf("after a fix on a healthy node: %.4f GB/s (%v), baseline %.4f", bw, err, l.Baseline())
	if r := dry(grader.Diagnosis{Class: class, Location: loc, Evidence: real}, &grader.Measurement{Baseline: l.Baseline(), After: bw}); criterion(r, "remediation") != 0 {
		t.Errorf("(d) a fix that does not fix earned remediation credit: %+v", r)
	}
	// (a) the real fix: the node's MTU back to the plan; then full-size pings pass.
	typeAndWait(t, l, node, "ip link set dev rdma0 mtu 1500")
	expect(peer, "ping -c 3 -i 0.2 -W 1 -M do -s 1472 "+nodeIP, " 0% packet loss")
	res, err := l.Grade(context.Background(), grader.Diagnosis{Class: class, Location: loc, Evidence: real})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("(a) %+v", res)
	if !res.Passed || criterion(res, "evidence") == 0 || criterion(res, "remediation") == 0 {
		t.Errorf("(a) the right diagnosis with real evidence and a fix did not pass fully: %+v", res)
	}
}
