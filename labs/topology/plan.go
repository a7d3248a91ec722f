package topology

import (
	"fmt"
	"net/netip"
	"strings"
)

// Address plan. Every sandbox gets slice Index of Block (a /22); inside it,
// switch k (in file order) gets the k-th /26, and node n (in file order) gets
// host n+1 of every subnet it has a NIC on. Nothing depends on which other
// sandboxes exist, so an address can be computed by anyone who knows the index.
var (
	// Block is the RFC 2544 benchmarking range: never routed on real networks.
	Block = netip.MustParsePrefix("198.18.0.0/15")
)

const (
	// SliceBits is the prefix length of one sandbox's slice.
	SliceBits = 22
	// SubnetBits is the prefix length of one switch's subnet.
	SubnetBits = 26
	// MaxSandboxes is how many slices Block holds.
	MaxSandboxes = 1 << (SliceBits - 15)
)

// Plan is a topology laid out for one sandbox: every NIC with its address.
type Plan struct {
	Index int          `json:"index"`
	Slice netip.Prefix `json:"slice"`
	Nodes []NodePlan   `json:"nodes"`
	Nets  []SwitchPlan `json:"switches"`
	Topo  *Topology    `json:"-"`
}

// SwitchPlan is a switch and its subnet.
type SwitchPlan struct {
	Switch
	Subnet netip.Prefix `json:"subnet"`
}

// NodePlan is a node and its addressed NICs.
type NodePlan struct {
	Name string    `json:"name"`
	NICs []NICPlan `json:"nics"`
}

// NICPlan is a NIC with its address (Addr carries the subnet's prefix length).
type NICPlan struct {
	NIC
	Addr netip.Prefix `json:"addr"`
}

// SliceFor returns sandbox index's /22 of Block.
func SliceFor(index int) (netip.Prefix, error) {
	if index < 0 || index >= MaxSandboxes {
		return netip.Prefix{}, fmt.Errorf("sandbox index %d: want 0 to %d", index, MaxSandboxes-1)
	}
	return offset(Block.Addr(), index<<(32-SliceBits)).Prefix(SliceBits)
}

// Plan lays the topology out in sandbox index's slice.
func (t *Topology) Plan(index int) (*Plan, error) {
	slice, err := SliceFor(index)
	if err != nil {
		return nil, err
	}
	p := &Plan{Index: index, Slice: slice, Topo: t}
	subnet := map[string]netip.Prefix{}
	for k, s := range t.Switches {
		sub, _ := offset(slice.Addr(), k<<(32-SubnetBits)).Prefix(SubnetBits)
		subnet[s.Name] = sub
		p.Nets = append(p.Nets, SwitchPlan{Switch: s, Subnet: sub})
	}
	for n, node := range t.Nodes {
		np := NodePlan{Name: node.Name}
		for _, c := range node.NICs {
			sub, ok := subnet[c.Switch]
			if !ok {
				return nil, fmt.Errorf("node %s NIC %s: unknown switch %q", node.Name, c.Name, c.Switch)
			}
			np.NICs = append(np.NICs, NICPlan{NIC: c, Addr: netip.PrefixFrom(offset(sub.Addr(), n+1), SubnetBits)})
		}
		p.Nodes = append(p.Nodes, np)
	}
	return p, nil
}

// Node returns the plan of the node called name.
func (p *Plan) Node(name string) (NodePlan, bool) {
	for _, n := range p.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return NodePlan{}, false
}

// NIC returns the node's NIC called name.
func (n NodePlan) NIC(name string) (NICPlan, bool) {
	for _, c := range n.NICs {
		if c.Name == name {
			return c, true
		}
	}
	return NICPlan{}, false
}

// DataNICs lists the node's NICs on data switches.
func (n NodePlan) DataNICs() []NICPlan {
	var out []NICPlan
	for _, c := range n.NICs {
		if c.Role == Data {
			out = append(out, c)
		}
	}
	return out
}

// Table prints the plan as an aligned table (node, NIC, switch, role, address,
// rate, MTU), one line per NIC: for terminals and golden files.
func (p *Plan) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-10s %-8s %-8s %-10s %-18s %-8s %s\n", "NODE", "NIC", "SWITCH", "ROLE", "ADDRESS", "RATE", "MTU")
	for _, n := range p.Nodes {
		for _, c := range n.NICs {
			rate := "-"
			if c.Rate > 0 {
				rate = c.Rate.String()
			}
			fmt.Fprintf(&b, "%-10s %-8s %-8s %-10s %-18s %-8s %d\n", n.Name, c.Name, c.Switch, c.Role, c.Addr, rate, c.MTU)
		}
	}
	if in := p.Topo.IntraNode; in != nil {
		fmt.Fprintf(&b, "intra-node fabric %q: %s on each node's loopback\n", in.Name, in.Rate)
	}
	return b.String()
}

func offset(a netip.Addr, n int) netip.Addr {
	b := a.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(n)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
