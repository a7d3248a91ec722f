//go:build linux

package injector

import (
	"strings"
	"testing"
	"time"
)

func TestNICDownRoundTrip(t *testing.T) {
	l := newLab(t, 1500, "n1", "n2")
	in := newInjector(t)
	roundTrip(t, l, in, "n1", mustParse(t, in, "nic-down", map[string]string{"nic": "rdma0"}), func(t *testing.T, e Entry) {
		out := l.Run(t, "n1", "ip", "link", "show", "dev", "rdma0")
		mustContain(t, "ip link show rdma0", out, "state DOWN")
		if strings.Contains(out, ",UP") || strings.Contains(out, "<UP") {
			t.Errorf("rdma0 still has the UP flag: %s", out)
		}
		if out, err := l.Try("n1", "ping", "-c", "1", "-W", "1", l.Addr("n2", "rdma0")); err == nil {
			t.Errorf("ping over a down NIC succeeded: %s", out)
		}
	})
}

func TestNICFlapRoundTrip(t *testing.T) {
	l := newLab(t, 1500, "n1", "n2")
	in := newInjector(t)
	f := mustParse(t, in, "nic-flap", map[string]string{"nic": "rdma0", "period": "300ms", "duty": "50%"})
	roundTrip(t, l, in, "n1", f, func(t *testing.T, e Entry) {
		seen := map[string]int{}
		for range 30 {
			out := l.Run(t, "n1", "ip", "-o", "link", "show", "dev", "rdma0")
			if strings.Contains(out, "state DOWN") {
				seen["down"]++
			} else {
				seen["up"]++
			}
			time.Sleep(20 * time.Millisecond)
		}
		if seen["down"] == 0 || seen["up"] == 0 {
			t.Errorf("ip link over 600ms of a 300ms flap: %v, want both states", seen)
		}
		if p := tagged(e.ID); len(p) != 1 {
			t.Errorf("flap driver processes: %v, want one", p)
		}
	})
}

// TestNICFlapDeadline: the driver stops by itself at the deadline and leaves the
// NIC up, even with nobody to revert it.
func TestNICFlapDeadline(t *testing.T) {
	l := newLab(t, 1500, "n1")
	in := newInjector(t)
	f := mustParse(t, in, "nic-flap", map[string]string{"nic": "rdma0", "period": "200ms", "duty": "90%"})
	e, err := in.Apply(ctxT(t), l.target("n1"), f, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(4 * time.Second)
	for len(tagged(e.ID)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("flap driver still running 3s after its deadline")
		}
		time.Sleep(50 * time.Millisecond)
	}
	mustContain(t, "ip link show rdma0", l.Run(t, "n1", "ip", "link", "show", "dev", "rdma0"), "state UP")
}

func TestMTUMismatchRoundTrip(t *testing.T) {
	l := newLab(t, 1500, "n1", "n2")
	in := newInjector(t)
	roundTrip(t, l, in, "n1", mustParse(t, in, "mtu-mismatch", map[string]string{"nic": "rdma0", "mtu": "1400"}), func(t *testing.T, e Entry) {
		mustContain(t, "ip link show rdma0", l.Run(t, "n1", "ip", "link", "show", "dev", "rdma0"), "mtu 1400 ")
		// A full-size, don't-fragment ping no longer fits.
		if out, err := l.Try("n1", "ping", "-c", "1", "-W", "1", "-M", "do", "-s", "1472", l.Addr("n2", "rdma0")); err == nil {
			t.Errorf("1500-byte DF ping through MTU 1400 succeeded: %s", out)
		}
	})
}

func TestWrongRouteRoundTrip(t *testing.T) {
	l := newLab(t, 1500, "n1", "n2")
	in := newInjector(t)
	roundTrip(t, l, in, "n1", mustParse(t, in, "wrong-route", map[string]string{"to": "198.18.1.0/24", "nic": "eth0"}), func(t *testing.T, e Entry) {
		mustContain(t, "ip route get", l.Run(t, "n1", "ip", "route", "get", l.Addr("n2", "rdma0")), "dev eth0")
		mustContain(t, "ip route", l.Run(t, "n1", "ip", "route"), "198.18.1.0/25 dev eth0 proto 193", "198.18.1.128/25 dev eth0 proto 193")
		// The data traffic now crosses the management NIC (n2 answers ARP for its
		// rdma0 address there too, as Linux does), not the data rail.
		before := l.txPackets(t, "n1")
		l.Run(t, "n1", "ping", "-q", "-c", "20", "-i", "0.002", l.Addr("n2", "rdma0"))
		after := l.txPackets(t, "n1")
		if d := after["eth0"] - before["eth0"]; d < 20 {
			t.Errorf("eth0 sent %d packets during 20 pings to the data address, want >= 20", d)
		}
		if d := after["rdma0"] - before["rdma0"]; d > 2 {
			t.Errorf("rdma0 sent %d packets during the pings, want none", d)
		}
	})
	// A NIC names its subnet: the rail's routes go astray without the lab knowing
	// its addresses (the lab e2e test ch29 covers a node that is its subnet's first host).
	for _, node := range []string{"n1", "n2"} {
		peer := map[string]string{"n1": "n2", "n2": "n1"}[node]
		roundTrip(t, l, in, node, mustParse(t, in, "wrong-route", map[string]string{"to": "rdma0", "nic": "eth0"}), func(t *testing.T, e Entry) {
			mustContain(t, "ip route get", l.Run(t, node, "ip", "route", "get", l.Addr(peer, "rdma0")), "dev eth0")
			mustContain(t, "ip route", l.Run(t, node, "ip", "route"), "/25 dev eth0 proto 193")
		})
	}
	// A prefix that is not routed yet is added as is.
	roundTrip(t, l, in, "n1", mustParse(t, in, "wrong-route", map[string]string{"to": "198.18.1.11/32", "nic": "eth0", "via": "198.18.0.1"}), func(t *testing.T, e Entry) {
		mustContain(t, "ip route", l.Run(t, "n1", "ip", "route"), "198.18.1.11 via 198.18.0.1 dev eth0 proto 193")
	})
}
