//go:build linux

package injector

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/signal"
	"runtime"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// applyWire sets up the wire for nic (see kind_wire.go). Everything it creates
// is journaled before it exists; the helper attaches the filter once its sockets
// are open and removes it when it stops.
func applyWire(ctx context.Context, t Target, op *Op, nic string, delay, jitter time.Duration) (Undo, error) {
	if err := TCBPF(); err != nil {
		return nil, fmt.Errorf("%w (no sch_netem either)", err)
	}
	if len(op.Helper) == 0 {
		return nil, errors.New("the wire needs the helper process, and none is configured")
	}
	h, err := netlinkAt(t)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	l, err := linkIn(h, t, nic)
	if err != nil {
		return nil, err
	}
	own, err := ownsClsact(h, l)
	if err != nil {
		return nil, err
	}
	idx := l.Attrs().Index
	u := &wireUndo{Target: t, NIC: nic, Index: idx, Veth: wireVeth(op.ID, "a"), OwnClsact: own, FaultID: op.ID}
	if err := op.Record(&delayUndo{Wire: u}); err != nil {
		return nil, err
	}
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: u.Veth, MTU: l.Attrs().MTU, TxQLen: 1000}, PeerName: wireVeth(op.ID, "b"), PeerMTU: uint32(l.Attrs().MTU)}
	if err := h.LinkAdd(v); err != nil {
		return u, fmt.Errorf("add veth %s: %w", u.Veth, err)
	}
	ends := make([]netlink.Link, 2)
	for i, name := range []string{v.Name, v.PeerName} {
		if ends[i], err = h.LinkByName(name); err != nil {
			return u, fmt.Errorf("find %s: %w", name, err)
		}
		if err := h.LinkSetUp(ends[i]); err != nil {
			return u, fmt.Errorf("set %s up: %w", name, err)
		}
	}
	if err := ensureClsact(h, l); err != nil {
		return u, err
	}
	cfg, _ := json.Marshal(wireConfig{Target: t, NIC: nic, Index: idx, In: ends[0].Attrs().Index, Out: ends[1].Attrs().Index,
		Delay: delay, Jitter: jitter, Deadline: op.Deadline.UnixNano()})
	argv := append(append([]string(nil), op.Helper...), "relay", base64.RawURLEncoding.EncodeToString(cfg))
	p, release, err := spawn(op.Helper, op.ID, argv)
	if err != nil {
		return u, err
	}
	u.Driver = &p
	if err := op.Record(&delayUndo{Wire: u}); err != nil {
		return u, err
	}
	if err := release(true); err != nil {
		return u, err
	}
	// Read back: the helper attaches the filter once its sockets are open.
	const readBack = 15 * time.Second
	deadline := time.Now().Add(readBack)
	for {
		if fs, err := ownFilters(h, l, clsactOut); err == nil && len(fs) == 1 {
			return u, nil
		}
		if !p.alive() {
			return u, errors.New("the wire helper exited at once")
		}
		if time.Now().After(deadline) {
			return u, fmt.Errorf("read back %s: the wire's filter is not there after %s", nic, readBack)
		}
		select {
		case <-ctx.Done():
			return u, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// Revert implements Undo.
func (u *delayUndo) Revert(ctx context.Context) error {
	if u.Wire != nil {
		return u.Wire.Revert(ctx)
	}
	if u.Netem != nil {
		return u.Netem.Revert(ctx)
	}
	return nil
}

// Revert implements Undo.
func (u *wireUndo) Revert(ctx context.Context) error {
	var recorded []Proc
	if u.Driver != nil {
		recorded = append(recorded, *u.Driver)
	}
	if err := stopProcs(ctx, u.FaultID, u.Target.BootID, recorded, unix.SIGTERM, 2*time.Second); err != nil {
		return err
	}
	filters := &tcFilterUndo{Target: u.Target, NIC: u.NIC, Index: u.Index, Parents: []uint32{clsactOut}, OwnClsact: u.OwnClsact}
	if err := filters.Revert(ctx); err != nil {
		return err
	}
	h, err := netlinkAt(u.Target)
	if errors.Is(err, errGone) {
		return nil
	}
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName(u.Veth)
	if isGone(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("find %s: %w", u.Veth, err)
	}
	if l.Type() != "veth" {
		return nil // not ours
	}
	if err := h.LinkDel(l); err != nil && !isGone(err) {
		return fmt.Errorf("delete veth %s: %w", u.Veth, err)
	}
	return nil
}

// runWire is the wire helper: it relays frames from the veth's far end to the
// NIC until SIGTERM or the deadline, then removes its filter.
func runWire(ctx context.Context, arg string) error {
	raw, err := base64.RawURLEncoding.DecodeString(arg)
	if err != nil {
		return err
	}
	var c wireConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return err
	}
	if err := ValidNIC(c.NIC); err != nil || c.Delay <= 0 || c.Jitter < 0 || c.Jitter > c.Delay {
		return errors.New("bad configuration")
	}
	ctx, stop := signal.NotifyContext(ctx, unix.SIGTERM, unix.SIGINT, unix.SIGHUP)
	defer stop()
	ctx, cancel := context.WithDeadline(ctx, time.Unix(0, c.Deadline))
	defer cancel()

	h, err := netlinkAt(c.Target)
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByIndex(c.Index)
	if err != nil || l.Attrs().Name != c.NIC {
		return fmt.Errorf("find %s: %v", c.NIC, err)
	}
	rx, tx, err := wireSockets(c)
	if err != nil {
		return err
	}
	defer unix.Close(rx)
	defer unix.Close(tx)
	mac := l.Attrs().HardwareAddr
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: tcProgName, Type: ebpf.SchedCLS, Instructions: wireProgram(c.In), License: "Dual MIT/GPL"})
	if err != nil {
		return fmt.Errorf("load the redirect program: %w", err)
	}
	flt := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: c.Index, Parent: clsactOut, Handle: 1, Priority: ownPrio, Protocol: unix.ETH_P_ALL},
		Fd:          prog.FD(), Name: tcProgName, DirectAction: true,
	}
	// Stop relaying only after the filter is gone, so no frame is stranded in the veth.
	defer func() {
		if fs, _ := ownFilters(h, l, clsactOut); len(fs) > 0 {
			_ = h.FilterDel(fs[0])
		}
	}()
	if err := h.FilterAdd(flt); err != nil {
		prog.Close()
		return fmt.Errorf("add the redirect filter on %s: %w", c.NIC, err)
	}
	prog.Close()

	q := make(chan frame, 1<<14)
	go readFrames(rx, mac, c.Delay, c.Jitter, q)
	realtime()
	for {
		select {
		case <-ctx.Done():
			return nil
		case f := <-q:
			waitUntil(f.due)
			to := unix.SockaddrLinklayer{Ifindex: c.Index, Protocol: f.proto}
			_ = unix.Sendto(tx, f.b, 0, &to) // a frame the NIC refuses is lost, as on a wire
		}
	}
}

// frame is one relayed frame: virtio_net_hdr then the Ethernet frame.
type frame struct {
	b     []byte
	proto uint16 // EtherType as it lies in memory (network order)
	due   time.Time
}

const vnetHdrLen = 10 // struct virtio_net_hdr

// wireSockets opens, inside the node's namespace, the socket reading the veth's
// far end and the one sending on the NIC.
func wireSockets(c wireConfig) (rx, tx int, err error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ns, err := openNS(c.Target)
	if err != nil {
		return -1, -1, err
	}
	defer ns.Close()
	orig, err := netns.Get()
	if err != nil {
		return -1, -1, err
	}
	defer orig.Close()
	if err := netns.Set(ns); err != nil {
		return -1, -1, err
	}
	defer netns.Set(orig) //nolint:errcheck // the thread stays locked until then
	open := func(proto int, ifindex int, opts func(fd int) error) (int, error) {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
		if err != nil {
			return -1, err
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("PACKET_VNET_HDR: %w", err)
		}
		if err := opts(fd); err != nil {
			unix.Close(fd)
			return -1, err
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: uint16(proto), Ifindex: ifindex}); err != nil {
			unix.Close(fd)
			return -1, err
		}
		return fd, nil
	}
	all := int(htons(unix.ETH_P_ALL))
	rx, err = open(all, c.Out, func(fd int) error {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 32<<20)
		return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	})
	if err != nil {
		return -1, -1, fmt.Errorf("open the wire's receive socket: %w", err)
	}
	tx, err = open(0, c.Index, func(fd int) error {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 32<<20)
		return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_MARK, wireMark)
	})
	if err != nil {
		unix.Close(rx)
		return -1, -1, fmt.Errorf("open the wire's send socket: %w", err)
	}
	return rx, tx, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// readFrames queues every frame the NIC sent (its source MAC; the veth's own
// IPv6 chatter is not relayed), due at its kernel arrival time plus the delay
// and a jitter draw, never before the frame ahead of it (order is kept). A full
// queue drops, as netem's limit does.
func readFrames(rx int, mac []byte, delay, jitter time.Duration, q chan<- frame) {
	realtime()
	buf := make([]byte, vnetHdrLen+65536+64)
	oob := make([]byte, 128)
	var last time.Time
	for {
		n, oobn, _, from, err := unix.Recvmsg(rx, buf, oob, 0)
		if err != nil {
			if errors.Is(err, unix.EINTR) || errors.Is(err, unix.ENOBUFS) {
				continue
			}
			return
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		if n < vnetHdrLen+14 || !bytes.Equal(buf[vnetHdrLen+6:vnetHdrLen+12], mac) {
			continue
		}
		at := arrival(oob[:oobn])
		due := at.Add(delay)
		if jitter > 0 {
			due = due.Add(time.Duration(rand.Int64N(int64(2*jitter)+1)) - jitter)
		}
		if due.Before(last) {
			due = last
		}
		last = due
		f := frame{b: bytes.Clone(buf[:n]), proto: binary.NativeEndian.Uint16(buf[vnetHdrLen+12:]), due: due}
		select {
		case q <- f:
		default:
		}
	}
}

// arrival is the kernel's receive time (SO_TIMESTAMPNS), or now.
func arrival(oob []byte) time.Time {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err == nil {
		for _, m := range msgs {
			if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_TIMESTAMPNS && len(m.Data) >= 16 {
				sec := int64(binary.NativeEndian.Uint64(m.Data))
				nsec := int64(binary.NativeEndian.Uint64(m.Data[8:]))
				return time.Unix(sec, nsec)
			}
		}
	}
	return time.Now()
}

// realtime gives the calling goroutine its own thread at a real-time priority
// (SCHED_FIFO 1): on a busy host a normal thread, or a timer of Go's, wakes up
// milliseconds late, more than a 2 ms delay's tenth. The wire's two threads
// sleep in the kernel between frames, so they take little CPU.
func realtime() {
	runtime.LockOSThread()
	_ = unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 1}, 0)
}

// waitUntil sleeps until t (CLOCK_REALTIME, as the kernel's receive stamps).
func waitUntil(t time.Time) {
	ts := unix.NsecToTimespec(t.UnixNano())
	for unix.ClockNanosleep(unix.CLOCK_REALTIME, unix.TIMER_ABSTIME, &ts, nil) == unix.EINTR {
	}
}
