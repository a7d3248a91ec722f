//go:build linux

package injector

import (
	"context"
	"errors"
	"fmt"
)

// Apply implements Fault.
func (f *MTUMismatch) Apply(ctx context.Context, t Target, op *Op) (Undo, error) {
	h, err := netlinkAt(t)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	l, err := linkIn(h, t, f.NIC)
	if err != nil {
		return nil, err
	}
	if l.Attrs().MTU == f.MTU {
		return nil, invalid("%s on %s already has MTU %d", f.NIC, t, f.MTU)
	}
	u := &mtuUndo{Target: t, NIC: f.NIC, Index: l.Attrs().Index, Prior: l.Attrs().MTU}
	if err := op.Record(u); err != nil {
		return nil, err
	}
	if err := h.LinkSetMTU(l, f.MTU); err != nil {
		return u, fmt.Errorf("set %s mtu %d: %w", f.NIC, f.MTU, err)
	}
	if l, err = h.LinkByName(f.NIC); err != nil || l.Attrs().MTU != f.MTU {
		return u, fmt.Errorf("read back %s: mtu not %d (err %v)", f.NIC, f.MTU, err)
	}
	return u, ctx.Err()
}

// Revert implements Undo: the prior MTU comes back whatever was set since.
func (u *mtuUndo) Revert(ctx context.Context) error {
	h, err := netlinkAt(u.Target)
	if errors.Is(err, errGone) {
		return nil
	}
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName(u.NIC)
	if isGone(err) || err == nil && l.Attrs().Index != u.Index {
		return nil
	}
	if err != nil {
		return fmt.Errorf("find %s: %w", u.NIC, err)
	}
	if l.Attrs().MTU == u.Prior {
		return nil
	}
	if err := h.LinkSetMTU(l, u.Prior); err != nil {
		return fmt.Errorf("restore %s mtu %d: %w", u.NIC, u.Prior, err)
	}
	return ctx.Err()
}
