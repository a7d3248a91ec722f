//go:build linux

package injector

import (
	"context"
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

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

// restoreRoot replaces a fault's root qdisc on link index idx by the prior one
// (or deletes it when the prior was the kernel's default). A root qdisc that is
// not a fault's is left alone: the revert already happened.
func restoreRoot(h *netlink.Handle, idx int, p priorRoot) error {
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
	name := l.Attrs().Name
	switch p.Kind {
	case "":
		if err := h.QdiscDel(q); err != nil && !isGone(err) && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("delete root qdisc c2: on %s: %w", name, err)
		}
	case "tbf":
		t := &netlink.Tbf{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: idx, Parent: netlink.HANDLE_ROOT, Handle: p.Handle},
			Rate: p.Rate, Limit: p.Limit, Buffer: p.Buffer, Peakrate: p.Peakrate, Minburst: p.Minburst}
		if err := h.QdiscReplace(t); err != nil {
			return fmt.Errorf("put back tbf %s on %s: %w", netlink.HandleStr(p.Handle), name, err)
		}
	default:
		return fmt.Errorf("journaled prior qdisc %q on %s: commlab cannot restore it", p.Kind, name)
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
	if err := ensureClsact(h, l); err != nil {
		return err
	}
	if err := h.FilterAdd(ingressRedirect(idx, ifbIdx)); err != nil {
		return fmt.Errorf("add ingress redirect filter on %s: %w", l.Attrs().Name, err)
	}
	return nil
}

// ingressRedirect is the fault's filter on link idx's ingress: u32 match-all with
// the fault priority, all protocols, mirred egress redirect to ifbIdx.
func ingressRedirect(idx, ifbIdx int) *netlink.U32 {
	return &netlink.U32{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: idx, Parent: clsactIn, Priority: ownPrio, Protocol: unix.ETH_P_ALL},
		Sel:         &netlink.TcU32Sel{Flags: nl_TC_U32_TERMINAL, Nkeys: 1, Keys: []netlink.TcU32Key{{Mask: 0, Val: 0}}},
		Actions:     []netlink.Action{netlink.NewMirredAction(ifbIdx)},
	}
}

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
	for _, f := range fs {
		if f.Attrs().Priority != ownPrio {
			continue
		}
		if err := h.FilterDel(f); err != nil && !isGone(err) {
			return fmt.Errorf("delete ingress filter on %s: %w", l.Attrs().Name, err)
		}
	}
	return releaseClsact(h, l, ownClsact)
}

// ownsClsact reports whether a fault about to add a filter on l may remove
// clsact once its filters are gone: l has none yet, or one that carries only
// commlab's filters (another fault's, which added it: the last one out removes
// it, whichever order they are reverted in).
func ownsClsact(h *netlink.Handle, l netlink.Link) (bool, error) {
	has, err := hasClsact(h, l)
	if err != nil || !has {
		return !has, err
	}
	n := 0
	for _, p := range []uint32{clsactIn, clsactOut} {
		fs, err := h.FilterList(l, p)
		if err != nil && !isGone(err) && !errors.Is(err, unix.EINVAL) {
			return false, fmt.Errorf("list filters on %s: %w", l.Attrs().Name, err)
		}
		for _, f := range fs {
			if f.Attrs().Priority != ownPrio {
				return false, nil
			}
			n++
		}
	}
	return n > 0, nil
}

// ensureClsact adds the clsact qdisc on l unless it is there.
func ensureClsact(h *netlink.Handle, l netlink.Link) error {
	if has, err := hasClsact(h, l); err != nil || has {
		return err
	}
	q := &netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Parent: netlink.HANDLE_CLSACT, Handle: clsactHdl}}
	if err := h.QdiscAdd(q); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("add clsact on %s: %w", l.Attrs().Name, err)
	}
	return nil
}

// releaseClsact deletes the clsact qdisc on l when the fault owns it (see
// ownsClsact) and no filter is left on either side.
func releaseClsact(h *netlink.Handle, l netlink.Link, own bool) error {
	if !own {
		return nil
	}
	for _, p := range []uint32{clsactIn, clsactOut} {
		if fs, _ := h.FilterList(l, p); len(fs) > 0 {
			return nil
		}
	}
	q := &netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Parent: netlink.HANDLE_CLSACT, Handle: clsactHdl}}
	if err := h.QdiscDel(q); err != nil && !isGone(err) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("delete clsact on %s: %w", l.Attrs().Name, err)
	}
	return nil
}

// newTCFilters prepares the undo of commlab's BPF filters at parents (clsactIn,
// clsactOut) on l, to be journaled before attach adds anything.
func newTCFilters(h *netlink.Handle, t Target, l netlink.Link, parents ...uint32) (*tcFilterUndo, error) {
	own, err := ownsClsact(h, l)
	if err != nil {
		return nil, err
	}
	return &tcFilterUndo{Target: t, NIC: l.Attrs().Name, Index: l.Attrs().Index, Parents: parents, OwnClsact: own}, nil
}

// attach adds clsact if missing, then prog as commlab's filter (direct
// action, priority c1) at each of u's parents, and reads them back.
func (u *tcFilterUndo) attach(h *netlink.Handle, l netlink.Link, prog *ebpf.Program) error {
	if err := ensureClsact(h, l); err != nil {
		return err
	}
	for _, p := range u.Parents {
		flt := &netlink.BpfFilter{
			FilterAttrs: netlink.FilterAttrs{LinkIndex: u.Index, Parent: p, Handle: 1, Priority: ownPrio, Protocol: unix.ETH_P_ALL},
			Fd:          prog.FD(), Name: tcProgName, DirectAction: true,
		}
		if err := h.FilterAdd(flt); err != nil {
			return fmt.Errorf("add %s bpf filter on %s: %w", clsactSide(p), u.NIC, err)
		}
		n, err := ownFilters(h, l, p)
		if err != nil {
			return err
		}
		if len(n) != 1 {
			return fmt.Errorf("read back %s filters on %s: %d of commlab's, want 1", clsactSide(p), u.NIC, len(n))
		}
		if _, ok := n[0].(*netlink.BpfFilter); !ok {
			return fmt.Errorf("read back %s filter on %s: %s, not bpf", clsactSide(p), u.NIC, n[0].Type())
		}
	}
	return nil
}

// Revert implements Undo.
func (u *tcFilterUndo) Revert(ctx context.Context) error {
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
				return fmt.Errorf("delete %s filter on %s: %w", clsactSide(p), u.NIC, err)
			}
		}
	}
	if err := releaseClsact(h, l, u.OwnClsact); err != nil {
		return err
	}
	return ctx.Err()
}

// clsactSide names a clsact parent as tc does.
func clsactSide(parent uint32) string {
	if parent == clsactIn {
		return "ingress"
	}
	return "egress"
}

// readPriorRoot reads what a fault's root qdisc will replace on l; it refuses a
// root qdisc it could not put back, and one that already is a fault's.
func readPriorRoot(h *netlink.Handle, l netlink.Link) (priorRoot, error) {
	q, err := rootQdisc(h, l)
	if err != nil || q == nil || q.Attrs().Handle>>16 == 0 {
		return priorRoot{}, err
	}
	name := l.Attrs().Name
	if q.Attrs().Handle == ownQdisc {
		return priorRoot{}, fmt.Errorf("%w: %s already has a fault's root qdisc %s %s", ErrConflict, name, q.Type(), netlink.HandleStr(q.Attrs().Handle))
	}
	tbf, ok := q.(*netlink.Tbf)
	if !ok {
		return priorRoot{}, fmt.Errorf("%w: %s has a root qdisc %s %s that commlab cannot put back; refusing to replace it",
			ErrConflict, name, q.Type(), netlink.HandleStr(q.Attrs().Handle))
	}
	return priorRoot{Kind: "tbf", Handle: tbf.Handle, Rate: tbf.Rate, Limit: tbf.Limit, Buffer: tbf.Buffer, Peakrate: tbf.Peakrate, Minburst: tbf.Minburst}, nil
}

// delOwnRoot deletes the root qdisc of link index idx if it is a fault's.
func delOwnRoot(h *netlink.Handle, idx int) error { return restoreRoot(h, idx, priorRoot{}) }
