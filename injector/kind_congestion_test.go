//go:build linux

package injector

import (
	"context"
	"fmt"
	"github.com/commlab/commlab/internal/testlab"
	"os"
	"strings"
	"testing"
	"time"
)

// TestCongestionRoundTrip: two UDP senders at 100 Mbit/s each converge on n1,
// whose switch port is a 100 Mbit/s bottleneck; a victim TCP flow from n4 is
// crushed while the fault is active. (TCP senders compete too, but share fairly,
// which on a loaded test machine makes the effect vary.)
func TestCongestionRoundTrip(t *testing.T) {
	l := newLab(t, 1500, "n1", "n2", "n3", "n4")
	in := newInjector(t)
	// The switch port facing n1's rdma0 (a veth in the fabric) runs at 100 Mbit/s.
	if out, err := testlab.TryIn(l.FabricNetNS(), "tc", "qdisc", "replace", "dev", l.FabricPort("n1", "rdma0"), "root", "tbf", "rate", "100mbit", "burst", "64kb", "latency", "20ms"); err != nil {
		t.Fatalf("shape the switch port: %v: %s", err, out)
	}
	victim := func() float64 {
		return jnum(t, l.iperf3(t, "n1", "n4", "-t", "2", "-O", "1"), "end", "sum_received", "bits_per_second") / 1e6
	}
	t0 := time.Now()
	alone := victim()
	t.Logf("victim alone %.0f Mbit/s in %s", alone, time.Since(t0))
	f := mustParse(t, in, "congestion", map[string]string{"nic": "rdma0", "senders": "n2,n3", "rate": "100mbit", "proto": "udp"})
	roundTrip(t, l, in, "n1", f, func(t *testing.T, e Entry) {
		procs := tagged(e.ID)
		if len(procs) != 4 {
			t.Errorf("want 2 iperf3 servers and 2 clients, found tagged processes %v", procs)
		}
		// Each runs in its own node's cgroup (ps -o cgroup would show it).
		nodes := map[string]int{}
		for _, p := range procs {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", p.PID))
			for _, n := range []string{"n1", "n2", "n3"} {
				if strings.Contains(string(b), "/commlab/"+l.ID+"/"+n+"\n") {
					nodes[n]++
				}
			}
		}
		if nodes["n1"] != 2 || nodes["n2"] != 1 || nodes["n3"] != 1 {
			t.Errorf("processes per node cgroup: %v, want n1:2 n2:1 n3:1", nodes)
		}
		// The senders' control connections come up a moment after Apply returns
		// (later still on a busy machine): wait for them, as a learner re-running ss would.
		ss := l.Run(t, "n1", "ss", "-tn")
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end) &&
			!(strings.Contains(ss, l.Addr("n1", "rdma0")+":5301") && strings.Contains(ss, l.Addr("n1", "rdma0")+":5302")); {
			time.Sleep(100 * time.Millisecond)
			ss = l.Run(t, "n1", "ss", "-tn")
		}
		mustContain(t, "ss -tn", ss, l.Addr("n1", "rdma0")+":5301", l.Addr("n1", "rdma0")+":5302")
		// Delivered counts what n1 accepts per stream, after every filter chain: a
		// stream n1's own filter drops delivers nothing, the other still arrives.
		l.Run(t, "n1", "nft", "add table inet drop5302 { chain in { type filter hook input priority 0; udp dport 5302 drop; }; }")
		kept, err := Delivered(context.Background(), l.target("n1"), "probe", "udp", PortRange{5301, 5302}, time.Second)
		l.Run(t, "n1", "nft", "delete table inet drop5302")
		if err != nil || len(kept) != 2 || kept[0] < 10e6 || kept[1] != 0 {
			t.Errorf("Delivered with 5302 dropped: %v %v, want 5301 above 10 Mbit/s and 5302 at 0", kept, err)
		} else {
			t.Logf("delivered with 5302 dropped: %.1f Mbit/s to 5301, 0 to 5302", kept[0]/1e6)
		}
		if out := l.Run(t, "n1", "nft", "list ruleset"); strings.Contains(out, "probe") {
			t.Errorf("Delivered left its chain behind:\n%s", out)
		}
		t0 := time.Now()
		got := victim()
		t.Logf("victim congested %.0f Mbit/s in %s", got, time.Since(t0))
		if got > 0.4*alone {
			t.Errorf("victim flow: %.0f Mbit/s alone, %.0f Mbit/s under congestion; want below 40%%", alone, got)
		}
	})
}
