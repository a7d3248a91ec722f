package injector

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// tc objects commlab owns carry major handle 0xc1 (written c1: by tc) or filter
// priority 0xc1; commlab deletes nothing else.
const (
	ownMajor  = 0xc1
	ownPrio   = 0xc1
	ownQdisc  = ownMajor << 16
	clsactIn  = 0xfffffff2 // parent of clsact's ingress filters (ffff:fff2)
	clsactHdl = 0xffff0000
)

// tbfSizing returns tbf's burst and queue limit in bytes for rate (bytes/s) and a
// link MTU: the burst covers 4 ms of traffic (one tick at HZ=250) and at least two
// frames, the queue 50 ms more, so TCP neither collapses nor sees line rate.
func tbfSizing(rateBps uint64, mtu int) (burst, limit uint32) {
	frame := uint64(mtu + 18)
	b := max(2*frame, rateBps*4/1000)
	l := b + rateBps*50/1000
	l = max(l, 3*frame)
	return uint32(min(b, 1<<30)), uint32(min(l, 1<<31))
}

func newTbf(linkIndex int, parent uint32, rate Rate, mtu int) *netlink.Tbf {
	bps := rate.BytesPerSecond()
	burst, limit := tbfSizing(bps, mtu)
	return &netlink.Tbf{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: linkIndex, Parent: parent, Handle: ownQdisc},
		Rate:       bps, Limit: limit, Buffer: netlink.Xmittime(bps, burst),
	}
}

// rootQdisc returns the root qdisc of a link, or nil.
func rootQdisc(h *netlink.Handle, l netlink.Link) (netlink.Qdisc, error) {
	qs, err := h.QdiscList(l)
	if err != nil {
		return nil, fmt.Errorf("list qdiscs on %s: %w", l.Attrs().Name, err)
	}
	for _, q := range qs {
		if q.Attrs().Parent == netlink.HANDLE_ROOT {
			return q, nil
		}
	}
	return nil, nil
}

// foreignRoot reports a root qdisc configured by someone else (the kernel's
// defaults have handle 0: and come back by themselves when ours is deleted).
func foreignRoot(q netlink.Qdisc) bool {
	if q == nil {
		return false
	}
	maj := q.Attrs().Handle >> 16
	return maj != 0 && maj != ownMajor
}

// delOwnRoot deletes the root qdisc of link index idx if it is ours.
func delOwnRoot(h *netlink.Handle, idx int) error {
	l, err := h.LinkByIndex(idx)
	if isGone(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("find link %d: %w", idx, err)
	}
	q, err := rootQdisc(h, l)
	if err != nil || q == nil || q.Attrs().Handle != ownQdisc {
		return err
	}
	if err := h.QdiscDel(q); err != nil && !isGone(err) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("delete root qdisc c1: on %s: %w", l.Attrs().Name, err)
	}
	return nil
}

// hasClsact reports whether link idx has a clsact or ingress qdisc (ffff:).
func hasClsact(h *netlink.Handle, l netlink.Link) (bool, error) {
	qs, err := h.QdiscList(l)
	if err != nil {
		return false, fmt.Errorf("list qdiscs on %s: %w", l.Attrs().Name, err)
	}
	for _, q := range qs {
		if q.Attrs().Parent == netlink.HANDLE_INGRESS || q.Attrs().Handle == clsactHdl {
			return true, nil
		}
	}
	return false, nil
}

// addIngressRedirect sends everything arriving at link idx to ifb (u32 match-all
// with priority c1, mirred egress redirect); it adds clsact if missing.
func addIngressRedirect(h *netlink.Handle, idx, ifbIdx int) error {
	l, err := h.LinkByIndex(idx)
	if err != nil {
		return err
	}
	if ok, err := hasClsact(h, l); err != nil {
		return err
	} else if !ok {
		q := &netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: idx, Parent: netlink.HANDLE_CLSACT, Handle: clsactHdl}}
		if err := h.QdiscAdd(q); err != nil {
			return fmt.Errorf("add clsact on %s: %w", l.Attrs().Name, err)
		}
	}
	f := &netlink.U32{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: idx, Parent: clsactIn, Priority: ownPrio, Protocol: unix.ETH_P_ALL},
		Sel:         &netlink.TcU32Sel{Flags: nl_TC_U32_TERMINAL, Nkeys: 1, Keys: []netlink.TcU32Key{{Mask: 0, Val: 0}}},
		Actions:     []netlink.Action{netlink.NewMirredAction(ifbIdx)},
	}
	if err := h.FilterAdd(f); err != nil {
		return fmt.Errorf("add ingress redirect filter on %s: %w", l.Attrs().Name, err)
	}
	return nil
}

// nl_TC_U32_TERMINAL is TC_U32_TERMINAL from linux/pkt_cls.h.
const nl_TC_U32_TERMINAL = 1

// delIngressRedirect removes commlab's priority-c1 ingress filters from link idx,
// and the clsact qdisc too when commlab added it and no other filter is left.
func delIngressRedirect(h *netlink.Handle, idx int, ownClsact bool) error {
	l, err := h.LinkByIndex(idx)
	if isGone(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("find link %d: %w", idx, err)
	}
	fs, err := h.FilterList(l, clsactIn)
	if err != nil && !isGone(err) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("list ingress filters on %s: %w", l.Attrs().Name, err)
	}
	others := 0
	for _, f := range fs {
		if f.Attrs().Priority != ownPrio {
			others++
			continue
		}
		if err := h.FilterDel(f); err != nil && !isGone(err) {
			return fmt.Errorf("delete ingress filter on %s: %w", l.Attrs().Name, err)
		}
	}
	if !ownClsact || others > 0 {
		return nil
	}
	q := &netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: idx, Parent: netlink.HANDLE_CLSACT, Handle: clsactHdl}}
	if err := h.QdiscDel(q); err != nil && !isGone(err) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("delete clsact on %s: %w", l.Attrs().Name, err)
	}
	return nil
}
