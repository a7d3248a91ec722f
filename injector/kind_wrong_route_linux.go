//go:build linux

package injector

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Apply implements Fault.
func (f *WrongRoute) Apply(ctx context.Context, t Target, op *Op) (Undo, error) {
	h, err := netlinkAt(t)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	l, err := linkIn(h, t, f.NIC)
	if err != nil {
		return nil, err
	}
	dst, own, err := f.destination(h, t)
	if err != nil {
		return nil, err
	}
	fam := unix.AF_INET
	if dst.IP.To4() == nil {
		fam = unix.AF_INET6
	}
	existing, err := h.RouteListFiltered(fam, &netlink.Route{Dst: dst, Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("list routes to %s: %w", dst, err)
	}
	prefixes := []*net.IPNet{dst}
	ones, bits := dst.Mask.Size()
	if len(existing) > 0 && ones < bits {
		prefixes = halves(dst)
	}
	u := &routeUndo{Target: t, Index: l.Attrs().Index}
	for _, p := range prefixes {
		u.Routes = append(u.Routes, p.String())
	}
	if err := op.Record(u); err != nil {
		return nil, err
	}
	for _, p := range prefixes {
		r := &netlink.Route{LinkIndex: l.Attrs().Index, Dst: p, Protocol: routeProto, Table: unix.RT_TABLE_MAIN, Scope: netlink.SCOPE_LINK}
		if f.Via != "" {
			r.Gw, r.Scope = net.ParseIP(f.Via), netlink.SCOPE_UNIVERSE
		}
		if err := h.RouteAdd(r); err != nil {
			return u, fmt.Errorf("add route %s dev %s: %w", p, f.NIC, err)
		}
	}
	probe := make(net.IP, len(dst.IP))
	copy(probe, dst.IP)
	if ones < bits {
		probe[len(probe)-1] |= 1
	}
	if probe.Equal(own) && ones < bits-1 {
		probe[len(probe)-1]++ // the node's own address is routed locally
	}
	got, err := h.RouteGet(probe)
	if err != nil || len(got) == 0 || got[0].LinkIndex != l.Attrs().Index {
		return u, fmt.Errorf("read back: %s is not routed through %s (err %v)", probe, f.NIC, err)
	}
	return u, ctx.Err()
}

// destination is the prefix to route astray: To itself, or the IPv4 subnet of the
// NIC it names, with that NIC's own address (nil for a prefix).
func (f *WrongRoute) destination(h *netlink.Handle, t Target) (*net.IPNet, net.IP, error) {
	if !f.toNIC() {
		_, dst, err := net.ParseCIDR(f.To)
		return dst, nil, err
	}
	l, err := linkIn(h, t, f.To)
	if err != nil {
		return nil, nil, err
	}
	addrs, err := h.AddrList(l, unix.AF_INET)
	if err != nil {
		return nil, nil, fmt.Errorf("addresses of %s: %w", f.To, err)
	}
	if len(addrs) == 0 {
		return nil, nil, fmt.Errorf("%s on %s has no IPv4 address, so no subnet to route astray", f.To, t)
	}
	a := addrs[0]
	return &net.IPNet{IP: a.IP.Mask(a.Mask), Mask: a.Mask}, a.IP.To4(), nil
}

// Revert implements Undo: deletes the routes with commlab's protocol tag only.
func (u *routeUndo) Revert(ctx context.Context) error {
	h, err := netlinkAt(u.Target)
	if errors.Is(err, errGone) {
		return nil
	}
	if err != nil {
		return err
	}
	defer h.Close()
	for _, s := range u.Routes {
		_, p, err := net.ParseCIDR(s)
		if err != nil {
			return fmt.Errorf("journaled route %q: %w", s, err)
		}
		fam := unix.AF_INET
		if p.IP.To4() == nil {
			fam = unix.AF_INET6
		}
		rs, err := h.RouteListFiltered(fam, &netlink.Route{Dst: p, Table: unix.RT_TABLE_MAIN, Protocol: routeProto},
			netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE|netlink.RT_FILTER_PROTOCOL)
		if err != nil {
			return fmt.Errorf("list routes to %s: %w", p, err)
		}
		for _, r := range rs {
			if err := h.RouteDel(&r); err != nil && !isGone(err) {
				return fmt.Errorf("delete route %s: %w", p, err)
			}
		}
	}
	return ctx.Err()
}
