package injector

import (
	"fmt"
	"strings"

	"github.com/commlab/commlab/internal/host"
)

// Loss loses a random share of a NIC's packets, in steps of 0.01 %. Inbound
// packets are dropped at the NIC's nftables ingress hook (numgen random mod
// 10000, in the node's netdev table commlab-<sandbox>); outbound ones are made
// to vanish after they left the NIC by a tc BPF filter at clsact egress (see
// lostOnWire), so that in both directions the loss looks like a lossy cable
// rather than a local error.
type Loss struct {
	NIC       string    `json:"nic" param:"nic,required" doc:"NIC inside the node, e.g. rdma0"`
	Percent   Percent   `json:"percent" param:"percent,required" doc:"share of packets lost, 0.01% to 100%"`
	Direction Direction `json:"direction" param:"direction" doc:"in (packets the NIC receives), out (packets it sends) or both"`
}

var _ Fault = (*Loss)(nil)

// LossKind registers loss.
func LossKind() Kind {
	return Kind{Name: "loss", Summary: "lose a random share of a NIC's packets (nftables in, tc BPF out)",
		Needs: []Feature{NeedNftables},
		New:   func() Fault { return &Loss{Direction: DirIn} }, NewUndo: func() Undo { return &lossUndo{} }}
}

// Kind implements Fault.
func (f *Loss) Kind() string { return "loss" }

// Validate implements Fault.
func (f *Loss) Validate() error {
	if err := ValidNIC(f.NIC); err != nil {
		return err
	}
	if f.Percent < 1 || f.Percent > 10000 {
		return invalid("percent %s: want 0.01%% to 100%%", f.Percent)
	}
	if !f.Direction.valid() {
		return invalid("direction %q: want in, out or both", f.Direction)
	}
	return nil
}

func (f *Loss) nics() []string { return []string{f.NIC} }

func (f *Loss) claims() []string { return netdevClaims(f.NIC, f.Direction) }

// netdevClaims: the outbound side is commlab's one clsact egress filter on nic
// (corrupt's and the wire's too); the inbound side is an nftables chain of its
// own, which stacks with any other.
func netdevClaims(nic string, dir Direction) []string {
	if dir.Out() {
		return []string{"egress-filter:" + nic}
	}
	return nil
}

// Command implements Fault.
func (f *Loss) Command(t Target) []string {
	return netdevCommands(t, f.NIC, f.Direction, "", uint32(f.Percent))
}

// netdevCommands is the nft and tc equivalent of a loss or roce-drop fault
// (match is the nft match of the packets it takes, "" for all).
func netdevCommands(t Target, nic string, dir Direction, match string, n uint32) []string {
	var out []string
	if dir.In() {
		tab := host.FaultTable(t.Sandbox)
		rnd := ""
		if n < 10000 {
			rnd = fmt.Sprintf("numgen random mod 10000 < %d ", n)
		}
		out = append(out, "nft add table netdev "+tab,
			fmt.Sprintf("nft add chain netdev %s in-%s '{ type filter hook ingress device %s priority filter; }'", tab, nic, nic),
			fmt.Sprintf("nft add rule netdev %s in-%s %s%scounter drop", tab, nic, match, rnd))
	}
	if dir.Out() {
		what := "every frame"
		if match != "" {
			what = "IPv4/IPv6 " + strings.TrimSpace(match)
		}
		out = append(out, fmt.Sprintf("tc qdisc add dev %s clsact", nic),
			fmt.Sprintf("tc filter add dev %s egress prio %d bpf direct-action obj lost.o  # %s of %s: Ethernet destination set to %s's own MAC (bpf_skb_store_bytes), so the peer discards it",
				nic, ownPrio, Percent(n), what, nic))
	}
	return out
}

// lossUndo reverts loss and roce-drop: the inbound nftables chain (and, in
// journals written before outbound loss moved to tc BPF, an egress chain) and
// the outbound filter.
type lossUndo struct {
	nftUndo
	Out *tcFilterUndo `json:"out,omitempty"`
}

// nftUndo deletes a fault's chains (and the sandbox's table once empty).
type nftUndo struct {
	Target Target   `json:"target"`
	Family string   `json:"family"`
	Chains []string `json:"chains"`
}
