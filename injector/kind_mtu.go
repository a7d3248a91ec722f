package injector

import (
	"context"
	"errors"
	"fmt"
)

// MTUMismatch sets a NIC's MTU to a value its peers do not use, so large frames
// are dropped on one side (ip link set dev X mtu N).
type MTUMismatch struct {
	NIC string `json:"nic" param:"nic,required" doc:"NIC inside the node, e.g. rdma0"`
	MTU int    `json:"mtu" param:"mtu,required" doc:"new MTU, 68 to 65535, different from the current one"`
}

var _ Fault = (*MTUMismatch)(nil)

// MTUMismatchKind registers mtu-mismatch.
func MTUMismatchKind() Kind {
	return Kind{Name: "mtu-mismatch", Summary: "set a NIC's MTU different from its peers'",
		New: func() Fault { return &MTUMismatch{} }, NewUndo: func() Undo { return &mtuUndo{} }}
}

// Kind implements Fault.
func (f *MTUMismatch) Kind() string { return "mtu-mismatch" }

// Validate implements Fault.
func (f *MTUMismatch) Validate() error {
	if err := ValidNIC(f.NIC); err != nil {
		return err
	}
	if f.MTU < 68 || f.MTU > 65535 {
		return invalid("mtu %d: want 68 to 65535", f.MTU)
	}
	return nil
}

func (f *MTUMismatch) nics() []string   { return []string{f.NIC} }
func (f *MTUMismatch) claims() []string { return []string{"mtu:" + f.NIC} }

// Command implements Fault.
func (f *MTUMismatch) Command(Target) []string {
	return []string{fmt.Sprintf("ip link set dev %s mtu %d", f.NIC, f.MTU)}
}

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

type mtuUndo struct {
	Target Target `json:"target"`
	NIC    string `json:"nic"`
	Index  int    `json:"index"`
	Prior  int    `json:"prior_mtu"`
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
