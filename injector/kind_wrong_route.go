package injector

import (
	"fmt"
	"math/big"
	"net"
	"strings"

	"github.com/vishvananda/netlink"
)

// routeProto tags the routes commlab adds (ip route shows "proto 193").
const routeProto = netlink.RouteProtocol(ownPrio)

// WrongRoute sends traffic for a destination through the wrong NIC (typically the
// management NIC), as a stray static route would. When the destination is
// exactly a route that exists already (a NIC's connected subnet), its two
// halves are added instead: more specific routes win without deleting anything.
// The destination can also be one of the node's NICs, standing for that NIC's
// connected subnet: a lab names a rail without knowing its sandbox's addresses.
type WrongRoute struct {
	To  string `json:"to" param:"to,required" doc:"destination prefix whose traffic goes astray, e.g. 198.18.1.0/24, or a NIC of the node (its IPv4 subnet), e.g. rdma0"`
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

// toNIC reports whether the destination is a NIC's subnet rather than a prefix.
func (f *WrongRoute) toNIC() bool { return !strings.Contains(f.To, "/") }

// Validate implements Fault.
func (f *WrongRoute) Validate() error {
	if f.toNIC() {
		if err := ValidNIC(f.To); err != nil {
			return invalid("to %q: want a prefix such as 198.18.1.0/24 or a NIC such as rdma0", f.To)
		}
		if f.To == f.NIC {
			return invalid("to %q: the traffic of %s already leaves through it", f.To, f.NIC)
		}
		if f.Via != "" && net.ParseIP(f.Via).To4() == nil {
			return invalid("via %q: want an IPv4 address (a NIC's subnet is its IPv4 subnet)", f.Via)
		}
		return ValidNIC(f.NIC)
	}
	_, dst, err := net.ParseCIDR(f.To)
	if err != nil {
		return invalid("to %q: want a prefix such as 198.18.1.0/24 or a NIC such as rdma0", f.To)
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

func (f *WrongRoute) nics() []string {
	if f.toNIC() {
		return []string{f.NIC, f.To}
	}
	return []string{f.NIC}
}

func (f *WrongRoute) claims() []string {
	if f.toNIC() {
		return []string{"route:" + f.To}
	}
	_, d, _ := net.ParseCIDR(f.To)
	return []string{"route:" + d.String()}
}

// Command implements Fault.
func (f *WrongRoute) Command(Target) []string {
	dst := "<the subnet of " + f.To + ">"
	if !f.toNIC() {
		_, d, _ := net.ParseCIDR(f.To)
		dst = d.String()
	}
	via := ""
	if f.Via != "" {
		via = " via " + f.Via
	}
	return []string{fmt.Sprintf("ip route add %s%s dev %s proto %d", dst, via, f.NIC, routeProto)}
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
