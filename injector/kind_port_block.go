package injector

import (
	"context"
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

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

// Apply implements Fault.
func (f *PortBlock) Apply(ctx context.Context, t Target, op *Op) (Undo, error) {
	rule := func(in bool) []expr.Any {
		var r []expr.Any
		if f.NIC != "" {
			r = matchIfname(in, f.NIC)
		} else {
			r = notLoopback(in)
		}
		r = append(r, matchL4(unix.IPPROTO_TCP, f.Ports)...)
		return append(r, drop()...)
	}
	var chains []nftChain
	if f.Direction.In() {
		chains = append(chains, nftChain{name: op.ID + "-in", hook: nftables.ChainHookInput, rules: [][]expr.Any{rule(true)}})
	}
	if f.Direction.Out() {
		chains = append(chains, nftChain{name: op.ID + "-out", hook: nftables.ChainHookOutput, rules: [][]expr.Any{rule(false)}})
	}
	return applyNft(ctx, t, op, "inet", chains)
}

// notLoopback matches packets whose input (or output) interface is not lo, so a
// node's own processes can still talk to themselves.
func notLoopback(in bool) []expr.Any {
	r := matchIfname(in, "lo")
	r[1].(*expr.Cmp).Op = expr.CmpOpNeq
	return r
}
