package topology

import "slices"

// Role says what a switch (and the NICs on it) carries.
type Role string

// Roles of a switch.
const (
	// Management is the out-of-band network (eth0 on real nodes): ssh, bootstrap.
	Management Role = "management"
	// Data is a rail of the GPU fabric (RoCE/InfiniBand NICs: rdma0, ib0, ...).
	Data Role = "data"
)

// Topology is a validated lab cluster. Build one with [Parse], [Load] or [Builtin];
// the zero value is not valid.
type Topology struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Source is where the topology came from: a file name or "builtin:<name>".
	Source    string     `json:"source,omitempty"`
	Switches  []Switch   `json:"switches"`
	Nodes     []Node     `json:"nodes"`
	IntraNode *IntraNode `json:"intra_node,omitempty"`
}

// Switch is one L2 segment: the management network or one data rail.
type Switch struct {
	Name string `json:"name"`
	Role Role   `json:"role"`
	// Rate is the default rate of the switch's ports; 0 means unshaped (management only).
	Rate Rate `json:"rate"`
	MTU  int  `json:"mtu"`
}

// Node is one machine of the cluster.
type Node struct {
	Name string `json:"name"`
	NICs []NIC  `json:"nics"`
}

// NIC is one network interface of a node, plugged into a switch.
type NIC struct {
	Name   string `json:"name"`
	Switch string `json:"switch"`
	Role   Role   `json:"role"`
	// Rate is the NIC's shaped rate in both directions; 0 means unshaped.
	Rate Rate `json:"rate"`
	MTU  int  `json:"mtu"`
}

// IntraNode is the fabric between GPUs of one node ("NVLink"). On the netns
// backend all ranks of a node share its network namespace, so their traffic
// crosses the node's loopback device, which is shaped to Rate.
type IntraNode struct {
	Name string `json:"name"`
	Rate Rate   `json:"rate"`
}

// Node returns the node called name.
func (t *Topology) Node(name string) (Node, bool) {
	i := slices.IndexFunc(t.Nodes, func(n Node) bool { return n.Name == name })
	if i < 0 {
		return Node{}, false
	}
	return t.Nodes[i], true
}

// Switch returns the switch called name.
func (t *Topology) Switch(name string) (Switch, bool) {
	i := t.switchIndex(name)
	if i < 0 {
		return Switch{}, false
	}
	return t.Switches[i], true
}

func (t *Topology) switchIndex(name string) int {
	return slices.IndexFunc(t.Switches, func(s Switch) bool { return s.Name == name })
}

// NodeNames lists the nodes in file order.
func (t *Topology) NodeNames() []string {
	out := make([]string, len(t.Nodes))
	for i, n := range t.Nodes {
		out[i] = n.Name
	}
	return out
}

// NICNames lists every NIC name any node has, each once, in file order.
func (t *Topology) NICNames() []string {
	var out []string
	for _, n := range t.Nodes {
		for _, nic := range n.NICs {
			if !slices.Contains(out, nic.Name) {
				out = append(out, nic.Name)
			}
		}
	}
	return out
}

// Rails counts the data switches.
func (t *Topology) Rails() int {
	n := 0
	for _, s := range t.Switches {
		if s.Role == Data {
			n++
		}
	}
	return n
}

// DataNICs lists the node's NICs on data switches.
func (n Node) DataNICs() []NIC {
	var out []NIC
	for _, c := range n.NICs {
		if c.Role == Data {
			out = append(out, c)
		}
	}
	return out
}

// NIC returns the node's NIC called name.
func (n Node) NIC(name string) (NIC, bool) {
	i := slices.IndexFunc(n.NICs, func(c NIC) bool { return c.Name == name })
	if i < 0 {
		return NIC{}, false
	}
	return n.NICs[i], true
}
