//go:build linux

package injector

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// Apply implements Fault.
func (f *NICDown) Apply(ctx context.Context, t Target, op *Op) (Undo, error) {
	h, err := netlinkAt(t)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	l, err := linkIn(h, t, f.NIC)
	if err != nil {
		return nil, err
	}
	u := &linkStateUndo{Target: t, NIC: f.NIC, Index: l.Attrs().Index, WasUp: l.Attrs().Flags&net.FlagUp != 0}
	if !u.WasUp {
		return nil, invalid("%s on %s is already down", f.NIC, t)
	}
	if err := op.Record(u); err != nil {
		return nil, err
	}
	if err := h.LinkSetDown(l); err != nil {
		return u, fmt.Errorf("set %s down: %w", f.NIC, err)
	}
	if up, err := linkUp(h, f.NIC); err != nil || up {
		return u, fmt.Errorf("read back %s: still up (err %v)", f.NIC, err)
	}
	return u, ctx.Err()
}

// Revert implements Undo.
func (u *linkStateUndo) Revert(ctx context.Context) error {
	if u.FaultID != "" {
		var recorded []Proc
		if u.Driver != nil {
			recorded = append(recorded, *u.Driver)
		}
		// SIGTERM first: the driver then sets the link up itself and exits.
		if err := stopProcs(ctx, u.FaultID, u.Target.BootID, recorded, unix.SIGTERM, 2*time.Second); err != nil {
			return err
		}
	}
	if !u.WasUp {
		return nil
	}
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
		return nil // the NIC was deleted (and maybe recreated): nothing of ours is left
	}
	if err != nil {
		return fmt.Errorf("find %s: %w", u.NIC, err)
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("set %s up: %w", u.NIC, err)
	}
	return nil
}
