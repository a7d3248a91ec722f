//go:build linux

package injector

import (
	"context"
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

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

func nftFamily(s string) (nftables.TableFamily, error) {
	switch s {
	case "netdev":
		return nftables.TableFamilyNetdev, nil
	case "inet":
		return nftables.TableFamilyINet, nil
	}
	return 0, fmt.Errorf("nftables family %q: want netdev or inet", s)
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
