package injector

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// NICDown sets a NIC administratively down (ip link set dev X down).
type NICDown struct {
	NIC string `json:"nic" param:"nic,required" doc:"NIC inside the node, e.g. rdma1"`
}

var _ Fault = (*NICDown)(nil)

// NICDownKind registers nic-down.
func NICDownKind() Kind {
	return Kind{Name: "nic-down", Summary: "set a NIC down",
		New: func() Fault { return &NICDown{} }, NewUndo: func() Undo { return &linkStateUndo{} }}
}

// Kind implements Fault.
func (f *NICDown) Kind() string { return "nic-down" }

// Validate implements Fault.
func (f *NICDown) Validate() error { return ValidNIC(f.NIC) }

func (f *NICDown) nics() []string   { return []string{f.NIC} }
func (f *NICDown) claims() []string { return []string{"state:" + f.NIC} }

// Command implements Fault.
func (f *NICDown) Command(Target) []string {
	return []string{fmt.Sprintf("ip link set dev %s down", f.NIC)}
}

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

func linkUp(h *netlink.Handle, nic string) (bool, error) {
	l, err := h.LinkByName(nic)
	if err != nil {
		return false, err
	}
	return l.Attrs().Flags&net.FlagUp != 0, nil
}

// linkStateUndo brings a NIC back up if it was up before (nic-down, nic-flap),
// after stopping the flap driver, if any.
type linkStateUndo struct {
	Target Target `json:"target"`
	NIC    string `json:"nic"`
	Index  int    `json:"index"`
	WasUp  bool   `json:"was_up"`
	// Flap: the fault id that tags the driver process, and the process once started.
	FaultID string `json:"fault_id,omitempty"`
	Driver  *Proc  `json:"driver,omitempty"`
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
