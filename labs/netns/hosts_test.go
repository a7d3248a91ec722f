package netns

import (
	"strings"
	"testing"

	"github.com/commlab/commlab/labs/topology"
)

func TestHostsFile(t *testing.T) {
	tests := []struct {
		topo string
		// want lines: address of node's NIC -> names
		node, nodeNIC string
		others        []string
	}{
		{"4x2", "node2", "eth0", []string{"node2-rdma0", "node2-rdma1", "node4-eth0"}},
		{"2x1", "node1", "eth0", []string{"node2", "node2-rdma0"}},
	}
	for _, tt := range tests {
		t.Run(tt.topo, func(t *testing.T) {
			topo, err := topology.Builtin(tt.topo)
			if err != nil {
				t.Fatal(err)
			}
			plan, err := topo.Plan(3)
			if err != nil {
				t.Fatal(err)
			}
			got := hostsFile(plan)
			fields := map[string]string{} // name -> address
			for _, line := range strings.Split(strings.TrimSpace(got), "\n") {
				f := strings.Fields(line)
				for _, name := range f[1:] {
					if strings.HasPrefix(f[0], "::") {
						continue // IPv6 loopback names
					}
					if prev, dup := fields[name]; dup {
						t.Fatalf("%s named twice (%s, %s):\n%s", name, prev, f[0], got)
					}
					fields[name] = f[0]
				}
			}
			np, _ := plan.Node(tt.node)
			want := np.NICs[0]
			for _, c := range np.NICs {
				if c.Name == tt.nodeNIC {
					want = c
				}
			}
			if fields[tt.node] != want.Addr.Addr().String() {
				t.Errorf("%s is %q, want %s's %s:\n%s", tt.node, fields[tt.node], want.Name, want.Addr.Addr(), got)
			}
			for _, n := range tt.others {
				if fields[n] == "" {
					t.Errorf("%s missing:\n%s", n, got)
				}
			}
			if fields["localhost"] != "127.0.0.1" {
				t.Errorf("no localhost:\n%s", got)
			}
		})
	}
}
