//go:build linux

package injector

import (
	"context"
	"fmt"
	"time"

	"github.com/vishvananda/netlink"
)

// applyNetem puts a netem qdisc at the root of nic (handle c2:); its undo is
// nic-rate's, which puts the prior root qdisc back.
func applyNetem(ctx context.Context, t Target, op *Op, nic string, attrs netlink.NetemQdiscAttrs) (Undo, error) {
	if !Probe(ctx).Netem {
		return nil, Features{}.Has(NeedNetem)
	}
	h, err := netlinkAt(t)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	l, err := linkIn(h, t, nic)
	if err != nil {
		return nil, err
	}
	prior, err := readPriorRoot(h, l)
	if err != nil {
		return nil, err
	}
	// netem replaces the lab's base tbf; its own rate keeps the link's speed.
	if prior.Kind == "tbf" {
		attrs.Rate64 = prior.Rate
	}
	u := &nicRateUndo{Target: t, NIC: nic, Index: l.Attrs().Index, Egress: true, TxQLen: l.Attrs().TxQLen, Prior: prior}
	if err := op.Record(u); err != nil {
		return nil, err
	}
	q := netlink.NewNetem(netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Parent: netlink.HANDLE_ROOT, Handle: ownQdisc}, attrs)
	if err := h.QdiscReplace(q); err != nil {
		return u, fmt.Errorf("add netem on %s: %w", nic, err)
	}
	got, err := rootQdisc(h, l)
	if err != nil {
		return u, err
	}
	if _, ok := got.(*netlink.Netem); !ok || got.Attrs().Handle != ownQdisc {
		return u, fmt.Errorf("read back %s: root qdisc is %v, not commlab's netem", nic, got)
	}
	return u, ctx.Err()
}

// applyDelay delays what nic sends by netem where the kernel has it, else by the wire.
func applyDelay(ctx context.Context, t Target, op *Op, nic string, delay, jitter Duration) (Undo, error) {
	if !Probe(ctx).Netem {
		return applyWire(ctx, t, op, nic, time.Duration(delay), time.Duration(jitter))
	}
	wrapped := *op
	wrapped.Record = func(u Undo) error { return op.Record(&delayUndo{Netem: u.(*nicRateUndo)}) }
	u, err := applyNetem(ctx, t, &wrapped, nic, netlink.NetemQdiscAttrs{
		Latency: uint32(time.Duration(delay).Microseconds()), Jitter: uint32(time.Duration(jitter).Microseconds())})
	if u == nil {
		return nil, err
	}
	return &delayUndo{Netem: u.(*nicRateUndo)}, err
}

// Apply implements Fault.
func (f *Delay) Apply(ctx context.Context, t Target, op *Op) (Undo, error) {
	return applyDelay(ctx, t, op, f.NIC, f.Delay, f.Jitter)
}

// Apply implements Fault.
func (f *Jitter) Apply(ctx context.Context, t Target, op *Op) (Undo, error) {
	return applyDelay(ctx, t, op, f.NIC, f.base(), f.Jitter)
}
