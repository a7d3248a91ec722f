package injector

import (
	"fmt"

	"github.com/commlab/commlab/internal/host"
)

// Loss drops a random fraction of a NIC's packets with nftables (numgen random
// mod 10000, so in steps of 0.01 %), in the node's netdev table commlab-<sandbox>.
// Inbound packets are dropped at the NIC's ingress hook; outbound ones are made
// to vanish after they left the NIC (see lostOnWire), so that in both directions
// the loss looks like a lossy cable rather than a local error.
type Loss struct {
	NIC       string    `json:"nic" param:"nic,required" doc:"NIC inside the node, e.g. rdma0"`
	Percent   Percent   `json:"percent" param:"percent,required" doc:"share of packets lost, 0.01% to 100%"`
	Direction Direction `json:"direction" param:"direction" doc:"in (packets the NIC receives), out (packets it sends) or both"`
}

var _ Fault = (*Loss)(nil)

// LossKind registers loss.
func LossKind() Kind {
	return Kind{Name: "loss", Summary: "drop a random share of a NIC's packets (nftables numgen)",
		Needs: []Feature{NeedNftables},
		New:   func() Fault { return &Loss{Direction: DirIn} }, NewUndo: func() Undo { return &nftUndo{} }}
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

// Command implements Fault.
func (f *Loss) Command(t Target) []string {
	return netdevCommands(t, f.NIC, f.Direction, "", uint32(f.Percent))
}

// netdevCommands is the nft equivalent of a netdev drop fault.
func netdevCommands(t Target, nic string, dir Direction, match string, n uint32) []string {
	tab := host.FaultTable(t.Sandbox)
	rnd := ""
	if n < 10000 {
		rnd = fmt.Sprintf("numgen random mod 10000 < %d ", n)
	}
	out := []string{"nft add table netdev " + tab}
	if dir.In() {
		out = append(out,
			fmt.Sprintf("nft add chain netdev %s in-%s '{ type filter hook ingress device %s priority filter; }'", tab, nic, nic),
			fmt.Sprintf("nft add rule netdev %s in-%s %s%scounter drop", tab, nic, match, rnd))
	}
	if dir.Out() {
		out = append(out,
			fmt.Sprintf("nft add chain netdev %s out-%s '{ type filter hook egress device %s priority filter; }'", tab, nic, nic),
			fmt.Sprintf("nft add rule netdev %s out-%s %s%scounter ether daddr set $(cat /sys/class/net/%s/address)", tab, nic, match, rnd, nic))
	}
	return out
}

// nftUndo deletes a fault's chains (and the sandbox's table once empty).
type nftUndo struct {
	Target Target   `json:"target"`
	Family string   `json:"family"`
	Chains []string `json:"chains"`
}
