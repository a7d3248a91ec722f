//go:build linux

package injector

import (
	"context"
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
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
	prog, err := loadTCProg(f.flip())
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
	has, err := hasClsact(h, l)
	if err != nil {
		return nil, err
	}
	idx := l.Attrs().Index
	u := &corruptUndo{Target: t, NIC: f.NIC, Index: idx, OwnClsact: !has}
	for _, d := range f.directions() {
		u.Parents = append(u.Parents, d.parent)
	}
	if err := op.Record(u); err != nil {
		return nil, err
	}
	if !has {
		q := &netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: idx, Parent: netlink.HANDLE_CLSACT, Handle: clsactHdl}}
		if err := h.QdiscAdd(q); err != nil {
			return u, fmt.Errorf("add clsact on %s: %w", f.NIC, err)
		}
	}
	for _, d := range f.directions() {
		flt := &netlink.BpfFilter{
			FilterAttrs: netlink.FilterAttrs{LinkIndex: idx, Parent: d.parent, Handle: 1, Priority: ownPrio, Protocol: unix.ETH_P_ALL},
			Fd:          prog.FD(), Name: tcProgName, DirectAction: true,
		}
		if err := h.FilterAdd(flt); err != nil {
			return u, fmt.Errorf("add %s bpf filter on %s: %w", d.name, f.NIC, err)
		}
		n, err := ownFilters(h, l, d.parent)
		if err != nil {
			return u, err
		}
		if len(n) != 1 {
			return u, fmt.Errorf("read back %s filters on %s: %d of commlab's, want 1", d.name, f.NIC, len(n))
		}
		if _, ok := n[0].(*netlink.BpfFilter); !ok {
			return u, fmt.Errorf("read back %s filter on %s: %s, not bpf", d.name, f.NIC, n[0].Type())
		}
	}
	return u, ctx.Err()
}

// Revert implements Undo.
func (u *corruptUndo) Revert(ctx context.Context) error {
	if u.Netem != nil {
		return u.Netem.Revert(ctx)
	}
	h, err := netlinkAt(u.Target)
	if isGone(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByIndex(u.Index)
	if isGone(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("find link %d (%s): %w", u.Index, u.NIC, err)
	}
	for _, p := range u.Parents {
		own, err := ownFilters(h, l, p)
		if err != nil {
			return err
		}
		for _, f := range own {
			if err := h.FilterDel(f); err != nil && !isGone(err) {
				return fmt.Errorf("delete filter on %s: %w", u.NIC, err)
			}
		}
	}
	if !u.OwnClsact {
		return ctx.Err()
	}
	for _, p := range []uint32{clsactIn, clsactOut} {
		if fs, _ := h.FilterList(l, p); len(fs) > 0 {
			return ctx.Err() // another user's filters: keep their clsact
		}
	}
	q := &netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: u.Index, Parent: netlink.HANDLE_CLSACT, Handle: clsactHdl}}
	if err := h.QdiscDel(q); err != nil && !isGone(err) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("delete clsact on %s: %w", u.NIC, err)
	}
	return ctx.Err()
}
