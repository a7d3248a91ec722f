package injector

import (
	"context"
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

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

// Apply implements Fault.
func (f *Loss) Apply(ctx context.Context, t Target, op *Op) (Undo, error) {
	return applyNetdevDrop(ctx, t, op, f.NIC, f.Direction, nil, uint32(f.Percent))
}

// applyNetdevDrop adds the in/out chains that drop n/10000 of the packets matching
// match on nic.
func applyNetdevDrop(ctx context.Context, t Target, op *Op, nic string, dir Direction, match []expr.Any, n uint32) (Undo, error) {
	h, err := netlinkAt(t)
	if err != nil {
		return nil, err
	}
	l, err := linkIn(h, t, nic)
	h.Close()
	if err != nil {
		return nil, err
	}
	var chains []nftChain
	if dir.In() {
		rule := append(append([]expr.Any(nil), match...), randomBelow(2, n, drop()...)...)
		chains = append(chains, nftChain{name: op.ID + "-in", hook: nftables.ChainHookIngress, device: nic,
			rules: [][]expr.Any{rule}})
	}
	if dir.Out() {
		if !Probe(ctx).NftEgress {
			return nil, fmt.Errorf("%w: this kernel has no nftables egress hook (5.16+), so outbound loss cannot be applied; use direction in", ErrUnsupported)
		}
		mac := l.Attrs().HardwareAddr
		if len(mac) != 6 {
			return nil, invalid("%s on %s is not an Ethernet NIC; outbound loss needs one", nic, t)
		}
		rule := append(append([]expr.Any(nil), match...), randomBelow(2, n, lostOnWire(mac)...)...)
		chains = append(chains, nftChain{name: op.ID + "-out", hook: nftables.ChainHookEgress, device: nic,
			rules: [][]expr.Any{rule}})
	}
	return applyNft(ctx, t, op, "netdev", chains)
}

// applyNft journals then adds chains, and reads them back.
func applyNft(ctx context.Context, t Target, op *Op, family string, chains []nftChain) (Undo, error) {
	u := &nftUndo{Target: t, Family: family}
	for _, c := range chains {
		u.Chains = append(u.Chains, c.name)
	}
	if err := op.Record(u); err != nil {
		return nil, err
	}
	fam, _ := nftFamily(family)
	if err := nftAdd(t, fam, chains); err != nil {
		return u, err
	}
	return u, ctx.Err()
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

func nftFamily(s string) (nftables.TableFamily, error) {
	switch s {
	case "netdev":
		return nftables.TableFamilyNetdev, nil
	case "inet":
		return nftables.TableFamilyINet, nil
	}
	return 0, fmt.Errorf("nftables family %q: want netdev or inet", s)
}

// nftUndo deletes a fault's chains (and the sandbox's table once empty).
type nftUndo struct {
	Target Target   `json:"target"`
	Family string   `json:"family"`
	Chains []string `json:"chains"`
}

// Revert implements Undo.
func (u *nftUndo) Revert(ctx context.Context) error {
	fam, err := nftFamily(u.Family)
	if err != nil {
		return err
	}
	if err := nftDel(u.Target, fam, u.Chains); err != nil {
		return err
	}
	return ctx.Err()
}
