package bench

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/commlab/commlab/bench/transport"
)

// listIfaces returns the interfaces that are up with an IPv4 address, in
// kernel order (as getifaddrs returns them to NCCL).
func listIfaces() ([]transport.Device, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	var out []transport.Device
	for _, i := range ifs {
		if i.Flags&net.FlagUp == 0 {
			continue
		}
		addrs, err := i.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			pn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(pn.IP)
			if !ok || !ip.Unmap().Is4() {
				continue
			}
			out = append(out, transport.Device{Name: i.Name, IP: ip.Unmap(), MTU: i.MTU})
			break
		}
	}
	return out, nil
}

// matchIfname filters devs with NCCL's interface list syntax: comma-separated
// prefixes, "^" to exclude, "=" for exact names.
func matchIfname(spec string, devs []transport.Device) []transport.Device {
	exclude := strings.HasPrefix(spec, "^")
	spec = strings.TrimPrefix(spec, "^")
	exact := strings.HasPrefix(spec, "=")
	spec = strings.TrimPrefix(spec, "=")
	var pats []string
	for _, p := range strings.Split(spec, ",") {
		if p = strings.TrimSpace(p); p != "" {
			// NCCL_IB_HCA entries may carry a port (mlx5_0:1).
			p, _, _ = strings.Cut(p, ":")
			pats = append(pats, p)
		}
	}
	var out []transport.Device
	for _, d := range devs {
		m := false
		for _, p := range pats {
			if (exact && d.Name == p) || (!exact && strings.HasPrefix(d.Name, p)) {
				m = true
				break
			}
		}
		if m != exclude {
			out = append(out, d)
		}
	}
	return out
}

// socketDevices picks NET/Socket and bootstrap interfaces as NCCL does: the
// NCCL_SOCKET_IFNAME list if set; otherwise "ib" interfaces, then anything but
// docker/lo/virbr, then docker, then lo.
func socketDevices(spec string, devs []transport.Device) []transport.Device {
	if spec != "" {
		return matchIfname(spec, devs)
	}
	for _, s := range []string{"ib", "^docker,lo,virbr", "docker", "lo"} {
		if m := matchIfname(s, devs); len(m) > 0 {
			return m
		}
	}
	return nil
}

// ibDevices picks the emulated RoCE HCAs: interfaces named rdma* (the lab's data
// NICs), or those NCCL_IB_HCA names.
func ibDevices(hca string, devs []transport.Device) []transport.Device {
	if hca != "" {
		return matchIfname(hca, devs)
	}
	return matchIfname("rdma", devs)
}

func devList(devs []transport.Device, ib bool) string {
	var b strings.Builder
	for i, d := range devs {
		if i > 0 {
			b.WriteByte(' ')
		}
		if ib {
			fmt.Fprintf(&b, "[%d]%s:1/RoCE", i, d.Name)
		} else {
			fmt.Fprintf(&b, "[%d]%s:%s<0>", i, d.Name, d.IP)
		}
	}
	return b.String()
}
