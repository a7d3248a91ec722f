//go:build linux

package injector

import (
	"context"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Apply implements Fault.
func (f *Loss) Apply(ctx context.Context, t Target, op *Op) (Undo, error) {
	return applyNetdevDrop(ctx, t, op, f.NIC, f.Direction, false, uint32(f.Percent))
}

// applyNetdevDrop loses n/10000 of nic's frames (RoCEv2 ones only when roce):
// inbound ones are dropped by an nftables ingress chain, outbound ones vanish
// after they left the NIC (a tc BPF filter at clsact egress, see lostOnWire).
func applyNetdevDrop(ctx context.Context, t Target, op *Op, nic string, dir Direction, roce bool, n uint32) (Undo, error) {
	h, err := netlinkAt(t)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	l, err := linkIn(h, t, nic)
	if err != nil {
		return nil, err
	}
	u := &lossUndo{nftUndo: nftUndo{Target: t, Family: "netdev"}}
	var chains []nftChain
	if dir.In() {
		var match []expr.Any
		if roce {
			match = matchL4(unix.IPPROTO_UDP, PortRange{roceV2Port, roceV2Port})
		}
		chains = append(chains, nftChain{name: op.ID + "-in", hook: nftables.ChainHookIngress, device: nic,
			rules: [][]expr.Any{append(match, randomBelow(2, n, drop()...)...)}})
		u.Chains = append(u.Chains, op.ID+"-in")
	}
	var prog *ebpf.Program
	if dir.Out() {
		mac := l.Attrs().HardwareAddr
		if len(mac) != 6 {
			return nil, invalid("%s on %s is not an Ethernet NIC; outbound loss needs one", nic, t)
		}
		w := lostOnWire{Below: uint64(n) << 32 / 10000, RoCE: roce}
		copy(w.MAC[:], mac)
		if prog, err = loadTCProg(w.program()); err != nil {
			return nil, fmt.Errorf("outbound loss: %w", err)
		}
		defer prog.Close() // the filter holds its own reference
		if u.Out, err = newTCFilters(h, t, l, clsactOut); err != nil {
			return nil, err
		}
	}
	if err := op.Record(u); err != nil {
		return nil, err
	}
	if len(chains) > 0 {
		if err := nftAdd(t, nftables.TableFamilyNetdev, chains); err != nil {
			return u, err
		}
	}
	if u.Out != nil {
		if err := u.Out.attach(h, l, prog); err != nil {
			return u, err
		}
	}
	return u, ctx.Err()
}

// Revert implements Undo.
func (u *lossUndo) Revert(ctx context.Context) error {
	if u.Out != nil {
		if err := u.Out.Revert(ctx); err != nil {
			return err
		}
	}
	if len(u.Chains) == 0 {
		return ctx.Err()
	}
	return u.nftUndo.Revert(ctx)
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
