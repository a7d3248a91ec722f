package injector

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// routeProto tags the routes commlab adds (ip route shows "proto 193").
const routeProto = netlink.RouteProtocol(ownPrio)

// WrongRoute sends traffic for a destination through the wrong NIC (typically the
// management NIC), as a stray static route would. When the destination is
// exactly a route that exists already (a NIC's connected subnet), its two
// halves are added instead: more specific routes win without deleting anything.
type WrongRoute struct {
	To  string `json:"to" param:"to,required" doc:"destination prefix whose traffic goes astray, e.g. 198.18.1.0/24"`
	NIC string `json:"nic" param:"nic,required" doc:"NIC the traffic is wrongly sent through, e.g. eth0"`
	Via string `json:"via" param:"via" doc:"optional gateway on that NIC"`
}

var _ Fault = (*WrongRoute)(nil)

// WrongRouteKind registers wrong-route.
func WrongRouteKind() Kind {
	return Kind{Name: "wrong-route", Summary: "route data traffic through the wrong NIC",
		New: func() Fault { return &WrongRoute{} }, NewUndo: func() Undo { return &routeUndo{} }}
}

// Kind implements Fault.
func (f *WrongRoute) Kind() string { return "wrong-route" }

// Validate implements Fault.
func (f *WrongRoute) Validate() error {
	_, dst, err := net.ParseCIDR(f.To)
	if err != nil {
		return invalid("to %q: want a prefix such as 198.18.1.0/24", f.To)
	}
	if ones, _ := dst.Mask.Size(); ones == 0 {
		return invalid("to %q: commlab never touches the default route", f.To)
	}
	if err := ValidNIC(f.NIC); err != nil {
		return err
	}
	if f.Via != "" {
		gw := net.ParseIP(f.Via)
		if gw == nil || (gw.To4() == nil) != (dst.IP.To4() == nil) {
			return invalid("via %q: want an address of the same family as %s", f.Via, f.To)
		}
	}
	return nil
}

func (f *WrongRoute) nics() []string { return []string{f.NIC} }
func (f *WrongRoute) claims() []string {
	_, d, _ := net.ParseCIDR(f.To)
	return []string{"route:" + d.String()}
}

// Command implements Fault.
func (f *WrongRoute) Command(Target) []string {
	_, d, _ := net.ParseCIDR(f.To)
	via := ""
	if f.Via != "" {
		via = " via " + f.Via
	}
	return []string{fmt.Sprintf("ip route add %s%s dev %s proto %d", d, via, f.NIC, routeProto)}
}

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
	_, dst, _ := net.ParseCIDR(f.To)
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
	got, err := h.RouteGet(probe)
	if err != nil || len(got) == 0 || got[0].LinkIndex != l.Attrs().Index {
		return u, fmt.Errorf("read back: %s is not routed through %s (err %v)", probe, f.NIC, err)
	}
	return u, ctx.Err()
}

// halves splits a prefix into its two halves (one bit longer).
func halves(n *net.IPNet) []*net.IPNet {
	ones, bits := n.Mask.Size()
	mask := net.CIDRMask(ones+1, bits)
	lo := &net.IPNet{IP: n.IP.Mask(mask), Mask: mask}
	v := new(big.Int).SetBytes(lo.IP)
	v.SetBit(v, bits-ones-1, 1)
	ip := make(net.IP, len(lo.IP))
	v.FillBytes(ip)
	return []*net.IPNet{lo, {IP: ip, Mask: mask}}
}

type routeUndo struct {
	Target Target   `json:"target"`
	Index  int      `json:"index"`
	Routes []string `json:"routes"`
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
