//go:build linux

package netns

import (
	"context"
	"os"

	"github.com/commlab/commlab/injector"
	"github.com/commlab/commlab/labs"
)

// Capabilities says what this sandbox offers: its topology's nodes and rails,
// no GPUs and no RDMA devices, and what the kernel supports, as found by
// commlab's one feature probe (injector.Probe, once per process).
func (s *Sandbox) Capabilities() labs.Capabilities {
	f := injector.Probe(context.Background())
	_, bashErr := os.Stat(ShellPath)
	return labs.Capabilities{
		Backend:         "netns",
		Nodes:           s.topo.NodeNames(),
		Rails:           s.topo.Rails(),
		IntraNodeFabric: s.topo.IntraNode != nil && f.TBF,
		Shaping:         f.TBF,
		Netem:           f.Netem,
		NFTables:        f.NftBridge,
		// A scratch namespace with a veth pair: root, and namespaces work.
		Shell: f.Veth && bashErr == nil,
	}
}
