package injector

import (
	"fmt"

	"github.com/commlab/commlab/internal/host"
)

// PortBlock drops TCP packets to a port range, as a host firewall would (e.g. the
// rendezvous/bootstrap port of a job), in the node's inet table commlab-<sandbox>.
// Inbound, connection attempts time out; outbound, connect() fails at once with
// "Operation not permitted", both as with a real firewall's drop rule.
type PortBlock struct {
	Ports     PortRange `json:"ports" param:"ports,required" doc:"TCP destination port or range, e.g. 29500 or 29500-29510"`
	NIC       string    `json:"nic" param:"nic" doc:"only on this NIC (default: every interface but loopback)"`
	Direction Direction `json:"direction" param:"direction" doc:"in (connections to this node), out (from it) or both"`
}

var _ Fault = (*PortBlock)(nil)

// PortBlockKind registers port-block.
func PortBlockKind() Kind {
	return Kind{Name: "port-block", Summary: "drop TCP to a port range (e.g. the bootstrap port)",
		Needs: []Feature{NeedNftables},
		New:   func() Fault { return &PortBlock{Direction: DirIn} }, NewUndo: func() Undo { return &nftUndo{} }}
}

// Kind implements Fault.
func (f *PortBlock) Kind() string { return "port-block" }

// Validate implements Fault.
func (f *PortBlock) Validate() error {
	if f.Ports.Lo == 0 {
		return invalid("ports: want a port (1-65535) or a range lo-hi")
	}
	if f.NIC != "" {
		if err := ValidNIC(f.NIC); err != nil {
			return err
		}
	}
	if !f.Direction.valid() {
		return invalid("direction %q: want in, out or both", f.Direction)
	}
	return nil
}

func (f *PortBlock) nics() []string {
	if f.NIC == "" {
		return nil
	}
	return []string{f.NIC}
}

// Command implements Fault.
func (f *PortBlock) Command(t Target) []string {
	tab := host.FaultTable(t.Sandbox)
	out := []string{"nft add table inet " + tab}
	add := func(chain, hook, ifkey string) {
		m := ""
		if f.NIC != "" {
			m = fmt.Sprintf("%s %s ", ifkey, f.NIC)
		} else {
			m = ifkey + " != lo "
		}
		out = append(out,
			fmt.Sprintf("nft add chain inet %s %s '{ type filter hook %s priority filter; }'", tab, chain, hook),
			fmt.Sprintf("nft add rule inet %s %s %stcp dport %s counter drop", tab, chain, m, f.Ports))
	}
	if f.Direction.In() {
		add("block-in", "input", "iifname")
	}
	if f.Direction.Out() {
		add("block-out", "output", "oifname")
	}
	return out
}
