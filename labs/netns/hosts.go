package netns

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/commlab/commlab/labs/topology"
)

// HostsPath is the sandbox's hosts file, which learner shells see read-only as
// /etc/hosts, so node names resolve in a lab ("ping node2").
func HostsPath(id string) string { return filepath.Join(sandboxRunDir(id), "hosts") }

// hostsFile names every node and NIC address of plan: a node's name is its
// management address (or, without a management network, its first NIC's), and
// every address is also <node>-<nic>, as clusters name their rail addresses.
func hostsFile(plan *topology.Plan) string {
	var b strings.Builder
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	for _, n := range plan.Nodes {
		named := -1
		for i, c := range n.NICs {
			if c.Role == topology.Management {
				named = i
				break
			}
		}
		if named < 0 && len(n.NICs) > 0 {
			named = 0
		}
		for i, c := range n.NICs {
			names := n.Name + "-" + c.Name
			if i == named {
				names = n.Name + "\t" + names
			}
			fmt.Fprintf(&b, "%s\t%s\n", c.Addr.Addr(), names)
		}
	}
	return b.String()
}

// writeHosts writes the sandbox's hosts file in its run directory (a tmpfs that
// goes with the sandbox).
func writeHosts(id string, plan *topology.Plan) error {
	return os.WriteFile(HostsPath(id), []byte(hostsFile(plan)), 0o644)
}
