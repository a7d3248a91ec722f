//go:build linux

package injector

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var rePingLoss = regexp.MustCompile(`(\d+) packets transmitted, (\d+) received`)

// pingLoss pings to from node count times and returns the loss fraction.
func (l *testLab) pingLoss(t *testing.T, node, to string, count int) float64 {
	t.Helper()
	out, _ := l.Try(node, "ping", "-q", "-n", "-c", strconv.Itoa(count), "-i", "0.002", "-W", "1", to)
	m := rePingLoss.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("ping output: %s", out)
	}
	sent, _ := strconv.Atoi(m[1])
	got, _ := strconv.Atoi(m[2])
	return 1 - float64(got)/float64(sent)
}

// TestLossRoundTrip: loss in each direction, in nodes whose namespaces are
// owned by user namespaces of their own (newLab). Outbound loss must show up as
// loss in ping, not as a local send error: the lost frames still leave the NIC.
func TestLossRoundTrip(t *testing.T) {
	l := newLab(t, 1500, "n1", "n2")
	l.pinNeighbours(t)
	in := newInjector(t)
	for _, tc := range []struct {
		dir     string
		listing []string // what lists the fault, and what it shows
		want    []string
	}{
		{"in", []string{"nft", "list", "table", "netdev", "commlab-" + l.ID}, []string{"hook ingress device \"rdma0\"", "numgen random mod 10000 < 2000", "drop"}},
		{"out", []string{"tc", "filter", "show", "dev", "rdma0", "egress"}, []string{"pref 193 bpf", "commlab_tc", "direct-action"}},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			f := mustParse(t, in, "loss", map[string]string{"nic": "rdma0", "percent": "20%", "direction": tc.dir})
			roundTrip(t, l, in, "n1", f, func(t *testing.T, e Entry) {
				mustContain(t, strings.Join(tc.listing, " "), l.Run(t, "n1", tc.listing...), tc.want...)
				tx := l.txPackets(t, "n1")["rdma0"]
				if loss := l.pingLoss(t, "n2", l.Addr("n1", "rdma0"), 400); loss < 0.12 || loss > 0.30 {
					t.Errorf("ping loss with 20%% %s: %.1f%%", tc.dir, 100*loss)
				}
				if sent := l.txPackets(t, "n1")["rdma0"] - tx; tc.dir == "out" && sent < 400 {
					t.Errorf("n1 rdma0 sent %d packets for 400 echo requests: the lost replies did not leave the NIC", sent)
				}
			})
		})
	}
}

// TestRoCEDropRoundTrip: roce-drop takes UDP to 4791 only, on the receiver's
// ingress and on the sender's egress (where the frames still leave the NIC).
func TestRoCEDropRoundTrip(t *testing.T) {
	l := newLab(t, 1500, "n1", "n2")
	l.pinNeighbours(t)
	in := newInjector(t)
	for _, tc := range []struct {
		dir, node string
	}{{"in", "n2"}, {"out", "n1"}} {
		t.Run(tc.dir, func(t *testing.T) {
			f := mustParse(t, in, "roce-drop", map[string]string{"nic": "rdma0", "direction": tc.dir})
			roundTrip(t, l, in, tc.node, f, func(t *testing.T, e Entry) {
				tx := l.txPackets(t, "n1")["rdma0"]
				if got := l.udpCount(t, "n1", "n2", 4791, 1000); got != 0 {
					t.Errorf("%d of 1000 datagrams to UDP 4791 arrived, want none", got)
				}
				if sent := l.txPackets(t, "n1")["rdma0"] - tx; sent < 1000 {
					t.Errorf("n1 rdma0 sent %d packets for 1000 datagrams to UDP 4791, want all on the wire", sent)
				}
				if got := l.udpCount(t, "n1", "n2", 4792, 1000); got < 995 {
					t.Errorf("%d of 1000 datagrams to UDP 4792 arrived, want all", got)
				}
				if tc.dir == "in" {
					mustContain(t, "nft list table", l.Run(t, "n2", "nft", "list", "table", "netdev", "commlab-"+l.ID), "udp dport 4791", "hook ingress", "counter packets 1000 ")
				} else {
					mustContain(t, "tc filter show", l.Run(t, "n1", "tc", "filter", "show", "dev", "rdma0", "egress"), "commlab_tc", "direct-action")
				}
			})
		})
	}
}

func TestPortBlockRoundTrip(t *testing.T) {
	l := newLab(t, 1500, "n1", "n2")
	in := newInjector(t)
	roundTrip(t, l, in, "n2", mustParse(t, in, "port-block", map[string]string{"ports": "29500-29510"}), func(t *testing.T, e Entry) {
		mustContain(t, "nft list table", l.Run(t, "n2", "nft", "list", "table", "inet", "commlab-"+l.ID), "hook input", "tcp dport 29500-29510", "drop")
		if out, err := l.iperf3Try(t, "n2", "n1", "29505", "-n", "1M", "--connect-timeout", "500"); err == nil {
			t.Errorf("iperf3 to a blocked port connected: %s", out)
		}
		l.iperf3Port(t, "n2", "n1", "29511", "-n", "1M")
	})
}

// TestLossOutStacks: outbound loss shares clsact with nic-rate's ingress
// redirect and tbf root qdisc on the same NIC, whichever is reverted first; the
// kinds that want commlab's one egress filter there (corrupt out, the wire) are
// refused as conflicts.
func TestLossOutStacks(t *testing.T) {
	l := newLab(t, 1500, "n1", "n2")
	l.pinNeighbours(t)
	in := newInjector(t)
	ctx := ctxT(t)
	base := l.snapshot(t, "n1")
	apply := func(kind string, params map[string]string) (Entry, error) {
		return in.Apply(ctx, l.target("n1"), mustParse(t, in, kind, params), time.Minute)
	}
	for _, lossFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("loss reverted first %v", lossFirst), func(t *testing.T) {
			rate, err := apply("nic-rate", map[string]string{"nic": "rdma0", "rate": "1Gbit", "direction": "both"})
			if err != nil {
				t.Fatal(err)
			}
			loss, err := apply("loss", map[string]string{"nic": "rdma0", "percent": "100%", "direction": "out"})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				kind   string
				params map[string]string
			}{
				{"corrupt", map[string]string{"nic": "rdma0", "percent": "1%", "direction": "out"}},
				{"delay", map[string]string{"nic": "rdma0", "delay": "1ms"}},
				{"roce-drop", map[string]string{"nic": "rdma0", "direction": "out"}},
			} {
				if e, err := apply(c.kind, c.params); !errors.Is(err, ErrConflict) {
					t.Errorf("%s beside outbound loss: %v, want a conflict", c.kind, err)
					if err == nil {
						in.Revert(ctx, e.ID)
					}
				}
			}
			if got := l.udpCount(t, "n1", "n2", 5000, 200); got != 0 {
				t.Errorf("%d of 200 datagrams arrived with 100%% outbound loss", got)
			}
			first, second := rate, loss
			if lossFirst {
				first, second = loss, rate
			}
			if err := in.Revert(ctx, first.ID); err != nil {
				t.Fatal(err)
			}
			if got, lost := l.udpCount(t, "n1", "n2", 5000, 200), !lossFirst; (got == 0) != lost {
				t.Errorf("%d of 200 datagrams arrived after reverting %s alone", got, first.Kind)
			}
			if err := in.Revert(ctx, second.ID); err != nil {
				t.Fatal(err)
			}
			assertSame(t, "after both reverts", base, l.snapshot(t, "n1"))
		})
	}
}
