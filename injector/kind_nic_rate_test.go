//go:build linux

package injector

import (
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/internal/testenv"
)

// roundTrip applies f to node, lets observe look at the fault with a learner's
// tools, reverts it, and checks the node is exactly as before and the journal empty.
func roundTrip(t *testing.T, l *testLab, in *Injector, node string, f Fault, observe func(t *testing.T, e Entry)) {
	t.Helper()
	ctx := ctxT(t)
	base := l.snapshot(t, node)
	t0 := time.Now()
	e, err := in.Apply(ctx, l.target(node), f, time.Minute)
	if err != nil {
		t.Fatalf("apply %s: %v", f.Kind(), err)
	}
	t.Logf("apply %s: %s", f.Kind(), time.Since(t0))
	if !e.Applied || len(e.Command) == 0 {
		t.Errorf("entry %+v: want applied with a debrief command", e)
	}
	if list, _ := in.List(); len(list) != 1 || list[0].ID != e.ID {
		t.Errorf("journal lists %v, want only %s", list, e.ID)
	}
	observe(t, e)
	t0 = time.Now()
	if err := in.Revert(ctx, e.ID); err != nil {
		t.Fatalf("revert: %v", err)
	}
	t.Logf("revert %s: %s", f.Kind(), time.Since(t0))
	// A second revert of the same undo finds nothing left and succeeds.
	if err := in.Revert(ctx, e.ID); err == nil || !strings.Contains(err.Error(), "no active fault") {
		t.Errorf("second revert by id: %v, want not found", err)
	}
	assertSame(t, "after revert", base, l.snapshot(t, node))
	if list, _ := in.List(); len(list) != 0 {
		t.Errorf("journal still lists %v", list)
	}
	if p := tagged(e.ID); len(p) != 0 {
		t.Errorf("tagged processes left: %v", p)
	}
}

func mustContain(t *testing.T, what, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Fatalf("%s: want %q in:\n%s", what, w, out)
		}
	}
}

func TestNICRateRoundTrip(t *testing.T) {
	l := newLab(t, 1500, "n1", "n2")
	in := newInjector(t)
	f := mustParse(t, in, "nic-rate", map[string]string{"nic": "rdma0", "rate": "40mbit", "direction": "both"})
	roundTrip(t, l, in, "n1", f, func(t *testing.T, e Entry) {
		mustContain(t, "tc -s qdisc show dev rdma0", l.Run(t, "n1", "tc", "-s", "qdisc", "show", "dev", "rdma0"), "qdisc tbf c2: root", "rate 40Mbit", "qdisc clsact ffff:")
		mustContain(t, "tc qdisc show dev cl-irdma0", l.Run(t, "n1", "tc", "qdisc", "show", "dev", "cl-irdma0"), "qdisc tbf c2: root", "rate 40Mbit")
		mustContain(t, "tc filter show dev rdma0 ingress", l.Run(t, "n1", "tc", "filter", "show", "dev", "rdma0", "ingress"), "pref 193 u32", "Egress Redirect to device cl-irdma0")
		for _, dir := range []struct {
			name string
			args []string
		}{{"out", nil}, {"in", []string{"-R"}}} {
			// A shaper never passes more than its rate, so the cap is exact; a busy
			// machine only lowers throughput, so a slow run is repeated.
			got := testenv.Throughput(3, 30, func() float64 {
				rep := l.iperf3(t, "n2", "n1", append([]string{"-t", "1"}, dir.args...)...)
				return jnum(t, rep, "end", "sum_received", "bits_per_second") / 1e6
			})
			if got > 42 || got < 30 {
				t.Errorf("iperf3 %s through 40mbit: %.1f Mbit/s", dir.name, got)
			}
		}
	})
}

func TestNICRateHTB(t *testing.T) {
	l := newLab(t, 1500, "n1", "n2")
	in := newInjector(t)
	f := mustParse(t, in, "nic-rate", map[string]string{"nic": "rdma0", "rate": "40mbit", "qdisc": "htb"})
	roundTrip(t, l, in, "n1", f, func(t *testing.T, e Entry) {
		mustContain(t, "tc qdisc show dev rdma0", l.Run(t, "n1", "tc", "qdisc", "show", "dev", "rdma0"), "qdisc htb c2: root")
		mustContain(t, "tc class show dev rdma0", l.Run(t, "n1", "tc", "class", "show", "dev", "rdma0"), "class htb c2:1 root", "rate 40Mbit ceil 40Mbit")
		got := testenv.Throughput(3, 30, func() float64 {
			return jnum(t, l.iperf3(t, "n2", "n1", "-t", "1"), "end", "sum_received", "bits_per_second") / 1e6
		})
		if got > 42 || got < 30 {
			t.Errorf("iperf3 through a 40mbit htb: %.1f Mbit/s", got)
		}
	})
}
