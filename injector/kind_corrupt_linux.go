//go:build linux

package injector

import (
	"context"

	"github.com/vishvananda/netlink"
)

// Apply implements Fault.
func (f *Corrupt) Apply(ctx context.Context, t Target, op *Op) (Undo, error) {
	if f.netem() {
		wrapped := *op
		wrapped.Record = func(u Undo) error { return op.Record(&corruptUndo{Netem: u.(*nicRateUndo)}) }
		u, err := applyNetem(ctx, t, &wrapped, f.NIC, netlink.NetemQdiscAttrs{CorruptProb: float32(f.Percent) / 100})
		if u == nil {
			return nil, err
		}
		return &corruptUndo{Netem: u.(*nicRateUndo)}, err
	}
	prog, err := loadTCProg(f.flip().program())
	if err != nil {
		return nil, err
	}
	defer prog.Close() // the filters hold their own reference
	h, err := netlinkAt(t)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	l, err := linkIn(h, t, f.NIC)
	if err != nil {
		return nil, err
	}
	var parents []uint32
	for _, d := range f.directions() {
		parents = append(parents, d.parent)
	}
	filters, err := newTCFilters(h, t, l, parents...)
	if err != nil {
		return nil, err
	}
	u := &corruptUndo{tcFilterUndo: *filters}
	if err := op.Record(u); err != nil {
		return nil, err
	}
	if err := u.attach(h, l, prog); err != nil {
		return u, err
	}
	return u, ctx.Err()
}

// Revert implements Undo.
func (u *corruptUndo) Revert(ctx context.Context) error {
	if u.Netem != nil {
		return u.Netem.Revert(ctx)
	}
	return u.tcFilterUndo.Revert(ctx)
}
