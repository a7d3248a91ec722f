//go:build linux

package testlab

import (
	"strconv"
	"strings"
	"testing"
)

func TestAddr(t *testing.T) {
	l := &Lab{ID: "tabc", Nodes: []string{"n1", "n2", "n3"}, nics: []NIC{{Name: "eth0", Net: 0}, {Name: "rdma0", Net: 1}}}
	for _, tc := range []struct{ node, nic, want string }{
		{"n1", "eth0", "198.18.0.10"},
		{"n3", "rdma0", "198.18.1.12"},
	} {
		if got := l.Addr(tc.node, tc.nic); got != tc.want {
			t.Errorf("Addr(%s, %s) = %s, want %s", tc.node, tc.nic, got, tc.want)
		}
	}
	if got := l.FabricPort("n2", "rdma0"); got != "p2-rdma0" {
		t.Errorf("FabricPort(n2, rdma0) = %s", got)
	}
}

// TestNew builds each shape of lab, checks that the far node answers on every
// NIC at the NIC's MTU, and that nothing is left once the test's cleanup ran.
func TestNew(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec Spec
	}{
		{"fabric", Spec{Fabric: true, Nodes: []string{"n1", "n2", "n3"}, NICs: []NIC{{Name: "eth0", Net: 0}, {Name: "rdma0", Net: 1, MTU: 9000}}}},
		{"pair", Spec{Nodes: []string{"a", "b"}, NICs: []NIC{{Name: "rdma0", Net: 1}}}},
	} {
		var id string
		t.Run(tc.name, func(t *testing.T) {
			l := New(t, tc.spec)
			id = l.ID
			last := l.Nodes[len(l.Nodes)-1]
			for _, c := range l.nics {
				// Don't fragment, the largest payload the MTU carries (IPv4 and ICMP headers: 28 bytes).
				out := l.Run(t, l.Nodes[0], "ping", "-c", "1", "-W", "5", "-M", "do", "-s", strconv.Itoa(c.MTU-28), l.Addr(last, c.Name))
				if !strings.Contains(out, " 0% packet loss") {
					t.Errorf("ping %s over %s:\n%s", last, c.Name, out)
				}
			}
		})
		if id == "" {
			continue // skipped
		}
		if left := Leftovers(id); len(left) > 0 {
			t.Errorf("%s: after cleanup, left: %v", tc.name, left)
		}
	}
}
