//go:build linux

package injector

import (
	"context"
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
)

// shapeRoot makes a tbf, or an htb with one default class, at rate the root
// qdisc (c2:) of l, and reads it back.
func shapeRoot(h *netlink.Handle, l netlink.Link, kind string, rate Rate, mtu int) error {
	name, idx := l.Attrs().Name, l.Attrs().Index
	if kind == "htb" {
		q := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: idx, Parent: netlink.HANDLE_ROOT, Handle: ownQdisc})
		q.Defcls = 1
		if err := h.QdiscReplace(q); err != nil {
			return fmt.Errorf("add htb on %s: %w", name, err)
		}
		burst, _ := tbfSizing(rate.BytesPerSecond(), mtu)
		c := netlink.NewHtbClass(netlink.ClassAttrs{LinkIndex: idx, Parent: ownQdisc, Handle: ownQdisc | 1},
			netlink.HtbClassAttrs{Rate: uint64(rate), Ceil: uint64(rate), Buffer: burst, Cbuffer: burst})
		if err := h.ClassReplace(c); err != nil {
			return fmt.Errorf("add htb class c2:1 on %s: %w", name, err)
		}
		cs, err := h.ClassList(l, ownQdisc)
		if err != nil {
			return fmt.Errorf("read back htb classes on %s: %w", name, err)
		}
		for _, c := range cs {
			if hc, ok := c.(*netlink.HtbClass); ok && hc.Handle == ownQdisc|1 && hc.Rate == rate.BytesPerSecond() {
				return nil
			}
		}
		return fmt.Errorf("read back %s: no htb class c2:1 at %s", name, rate)
	}
	if err := h.QdiscReplace(newTbf(idx, netlink.HANDLE_ROOT, rate, mtu)); err != nil {
		return fmt.Errorf("add tbf on %s: %w", name, err)
	}
	q, err := rootQdisc(h, l)
	if err != nil {
		return err
	}
	tbf, ok := q.(*netlink.Tbf)
	if !ok || tbf.Handle != ownQdisc {
		return fmt.Errorf("read back %s: root qdisc is %v, not commlab's tbf", name, q)
	}
	if tbf.Rate != rate.BytesPerSecond() {
		return fmt.Errorf("read back %s: tbf rate is %d B/s, asked %d B/s", name, tbf.Rate, rate.BytesPerSecond())
	}
	return nil
}

// Apply implements Fault.
func (f *NICRate) Apply(ctx context.Context, t Target, op *Op) (Undo, error) {
	h, err := netlinkAt(t)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	l, err := linkIn(h, t, f.NIC)
	if err != nil {
		return nil, err
	}
	idx, mtu := l.Attrs().Index, l.Attrs().MTU
	u := &nicRateUndo{Target: t, NIC: f.NIC, Index: idx, TxQLen: l.Attrs().TxQLen}
	if f.Direction.Out() {
		if u.Prior, err = readPriorRoot(h, l); err != nil {
			return nil, err
		}
		u.Egress = true
		if err := op.Record(u); err != nil {
			return nil, err
		}
		if err := shapeRoot(h, l, f.Qdisc, f.Rate, mtu); err != nil {
			return u, err
		}
	}
	if f.Direction.In() {
		own, err := ownsClsact(h, l)
		if err != nil {
			return u, err
		}
		u.Ingress, u.IFB, u.OwnClsact = true, ifbName(f.NIC), own
		if err := op.Record(u); err != nil {
			return u, err
		}
		ifb := &netlink.Ifb{LinkAttrs: netlink.LinkAttrs{Name: u.IFB, MTU: mtu, TxQLen: 1000}}
		if err := h.LinkAdd(ifb); err != nil {
			return u, fmt.Errorf("add ifb %s: %w", u.IFB, err)
		}
		il, err := h.LinkByName(u.IFB)
		if err != nil {
			return u, fmt.Errorf("find ifb %s: %w", u.IFB, err)
		}
		if err := h.LinkSetUp(il); err != nil {
			return u, fmt.Errorf("set %s up: %w", u.IFB, err)
		}
		if err := shapeRoot(h, il, f.Qdisc, f.Rate, mtu); err != nil {
			return u, err
		}
		if err := addIngressRedirect(h, idx, il.Attrs().Index); err != nil {
			return u, err
		}
	}
	return u, ctx.Err()
}

// Revert implements Undo: the ingress filter goes before the ifb it redirects to,
// so no packet is ever redirected to a missing device.
func (u *nicRateUndo) Revert(ctx context.Context) error {
	h, err := netlinkAt(u.Target)
	if errors.Is(err, errGone) {
		return nil
	}
	if err != nil {
		return err
	}
	defer h.Close()
	if l, err := h.LinkByName(u.NIC); err == nil && l.Attrs().Index == u.Index {
		if u.Ingress {
			if err := delIngressRedirect(h, u.Index, u.OwnClsact); err != nil {
				return err
			}
		}
		if u.Egress {
			if err := restoreRoot(h, u.Index, u.Prior); err != nil {
				return err
			}
			if l.Attrs().TxQLen != u.TxQLen && u.TxQLen >= 0 {
				if err := h.LinkSetTxQLen(l, u.TxQLen); err != nil && !isGone(err) {
					return fmt.Errorf("restore %s txqueuelen %d: %w", u.NIC, u.TxQLen, err)
				}
			}
		}
	} else if err != nil && !isGone(err) {
		return fmt.Errorf("find %s: %w", u.NIC, err)
	}
	if u.Ingress {
		if err := delLinkNamed(h, u.IFB, "ifb"); err != nil {
			return err
		}
	}
	return ctx.Err()
}
