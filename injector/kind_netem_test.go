//go:build linux

package injector

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// TestNetemKinds: with sch_netem the kinds round-trip; without it (this project's
// CI kernel) corrupt via=netem refuses with a clear message and leaves nothing
// behind, and delay and jitter use the wire (TestWireKinds).
func TestNetemKinds(t *testing.T) {
	l := newLab(t, 1500, "n1", "n2")
	in := newInjector(t)
	cases := []struct {
		kind   string
		params map[string]string
		want   string
	}{
		{"delay", map[string]string{"nic": "rdma0", "delay": "20ms"}, "delay 20ms"},
		{"jitter", map[string]string{"nic": "rdma0", "jitter": "5ms", "delay": "10ms"}, "delay 10ms  5ms"},
		{"corrupt", map[string]string{"nic": "rdma0", "percent": "1%", "via": "netem", "direction": "out"}, "corrupt 1%"},
	}
	for _, tc := range cases {
		t.Run(tc.kind, func(t *testing.T) {
			f := mustParse(t, in, tc.kind, tc.params)
			if !Probe(ctxT(t)).Netem {
				if tc.kind != "corrupt" {
					t.Skip("no sch_netem: the wire applies it (TestWireKinds)")
				}
				_, err := in.Apply(ctxT(t), l.target("n1"), f, MinTTL*60)
				if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "no sch_netem") {
					t.Fatalf("apply %s without netem: %v, want ErrUnsupported naming sch_netem", tc.kind, err)
				}
				if list, _ := in.List(); len(list) != 0 {
					t.Errorf("journaled %v", list)
				}
				if _, err := os.Stat(in.j.path()); err == nil {
					t.Errorf("journal file written for a refused fault")
				}
				return
			}
			roundTrip(t, l, in, "n1", f, func(t *testing.T, e Entry) {
				mustContain(t, "tc qdisc show dev rdma0", l.Run(t, "n1", "tc", "qdisc", "show", "dev", "rdma0"), "qdisc netem c2: root", tc.want)
			})
		})
	}
}

func TestSupports(t *testing.T) {
	needRoot(t)
	in := newInjector(t)
	if err := in.Supports(ctxT(t), "nic-rate"); err != nil {
		t.Errorf("nic-rate: %v", err)
	}
	if err := in.Supports(ctxT(t), "delay"); err != nil {
		t.Errorf("delay (netem or the wire): %v", err)
	}
	if err := in.Supports(ctxT(t), "teleport"); !errors.Is(err, ErrInvalid) {
		t.Errorf("unknown kind: %v", err)
	}
}
