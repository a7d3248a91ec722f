//go:build linux

package injector

import (
	"context"
	"fmt"
	"math"
	"net"
	"strconv"
	"time"

	"github.com/vishvananda/netlink"
)

// nicAddr returns the first global address of nic in t (IPv4 preferred).
func nicAddr(t Target, nic string) (net.IP, error) {
	h, err := netlinkAt(t)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	l, err := linkIn(h, t, nic)
	if err != nil {
		return nil, err
	}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		as, err := h.AddrList(l, fam)
		if err != nil {
			return nil, fmt.Errorf("list addresses of %s: %w", nic, err)
		}
		for _, a := range as {
			if a.IP.IsGlobalUnicast() {
				return a.IP, nil
			}
		}
	}
	return nil, invalid("%s on %s has no address for the senders to aim at", nic, t)
}

// Apply implements Fault.
func (f *Congestion) Apply(ctx context.Context, t Target, op *Op) (Undo, error) {
	ipTool, err := lookTool("ip")
	if err != nil {
		return nil, err
	}
	iperf, err := lookTool("iperf3")
	if err != nil {
		return nil, err
	}
	addr, err := nicAddr(t, f.NIC)
	if err != nil {
		return nil, err
	}
	senders := make([]Target, len(f.Senders))
	for i, s := range f.Senders {
		if s == t.Node {
			return nil, invalid("senders: %s is the receiving node itself", s)
		}
		if senders[i], err = t.peer(s).resolve(); err != nil {
			return nil, fmt.Errorf("sender %s: %w", s, err)
		}
	}
	u := &procsUndo{FaultID: op.ID, BootID: bootID()}
	if err := op.Record(u); err != nil {
		return nil, err
	}
	start := func(node Target, args ...string) (Proc, error) {
		p, release, err := spawn(op.Helper, op.ID, append([]string{ipTool, "netns", "exec", node.netnsName(), iperf}, args...))
		if err != nil {
			return p, err
		}
		u.Procs = append(u.Procs, p)
		if err := op.Record(u); err != nil {
			return p, err
		}
		if err := release(true); err != nil {
			return p, err
		}
		if cg := nodeCgroup(t, node.Node); cg != "" {
			if err := cgroupAddProc(cg, p.PID); err != nil {
				return p, err
			}
		}
		return p, nil
	}
	var servers []Proc
	for i := range senders {
		p, err := start(t, "-s", "-B", addr.String(), "-p", strconv.Itoa(f.Port+i))
		if err != nil {
			return u, err
		}
		servers = append(servers, p)
	}
	// The wait ends as soon as a server listens; the bound only matters on a host so
	// busy that starting iperf3 takes seconds (3 s was seen to pass at load 20).
	for i, p := range servers {
		if err := waitListen(ctx, p, f.Port+i, 15*time.Second); err != nil {
			return u, err
		}
	}
	secs := int(math.Ceil(time.Until(op.Deadline).Seconds()))
	for i, s := range senders {
		args := []string{"-c", addr.String(), "-p", strconv.Itoa(f.Port + i), "-b", f.Rate.String(), "-t", strconv.Itoa(max(secs, 1))}
		if f.Proto == "udp" {
			args = append(args, "-u")
		}
		if _, err := start(s, args...); err != nil {
			return u, fmt.Errorf("sender %s: %w", s.Node, err)
		}
	}
	// Read back: every sender is still running shortly after connecting.
	if !sleepCtx(ctx, 300*time.Millisecond) {
		return u, ctx.Err()
	}
	for i, p := range u.Procs {
		if !p.alive() {
			return u, fmt.Errorf("read back: iperf3 process %d of %d exited early (port %d busy? receiver unreachable?)", i+1, len(u.Procs), f.Port+i%len(senders))
		}
	}
	return u, nil
}
