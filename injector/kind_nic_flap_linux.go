//go:build linux

package injector

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// farEndOf finds the far end of nic's veth in t, if the host has it.
func farEndOf(t Target, nic string) (link, bool) {
	h, err := netlinkAt(t)
	if err != nil {
		return link{}, false
	}
	defer h.Close()
	l, err := h.LinkByName(nic)
	if err != nil {
		return link{}, false
	}
	far, err := farEnd(h, t, l)
	return far, err == nil
}

// farEnd finds the other end of the veth l: the link with l's peer index in
// the commlab namespace whose netns id (as l's namespace numbers it) l reports.
func farEnd(h *netlink.Handle, t Target, l netlink.Link) (link, error) {
	if l.Type() != "veth" {
		return link{}, invalid("carrier mode needs a veth; %s on %s is a %s", l.Attrs().Name, t, l.Type())
	}
	idx, nsid := l.Attrs().ParentIndex, l.Attrs().NetNsID
	if nsid < 0 { // both ends in the node's namespace
		p, err := h.LinkByIndex(idx)
		if err != nil {
			return link{}, fmt.Errorf("far end of %s: %w", l.Attrs().Name, err)
		}
		return link{Target: t, NIC: p.Attrs().Name, Index: idx}, nil
	}
	ents, err := os.ReadDir(netnsDir)
	if err != nil {
		return link{}, err
	}
	for _, e := range ents {
		if validNetNS(e.Name()) != nil {
			continue
		}
		ns, err := netns.GetFromPath(filepath.Join(netnsDir, e.Name()))
		if err != nil {
			continue
		}
		far, err := farEndIn(h, ns, nsid, idx)
		var st unix.Stat_t
		if err == nil {
			err = unix.Fstat(int(ns), &st)
		}
		ns.Close()
		if errors.Is(err, errNotThis) {
			continue
		}
		if err != nil {
			return link{}, fmt.Errorf("far end of %s in %s: %w", l.Attrs().Name, e.Name(), err)
		}
		return link{Target: Target{NetNS: e.Name(), NetNSInode: st.Ino, BootID: t.BootID}, NIC: far.Attrs().Name, Index: idx}, nil
	}
	return link{}, fmt.Errorf("far end of %s on %s: not in any commlab namespace", l.Attrs().Name, t)
}

func farEndIn(h *netlink.Handle, ns netns.NsHandle, nsid, idx int) (netlink.Link, error) {
	if id, err := h.GetNetNsIdByFd(int(ns)); err != nil || id != nsid {
		return nil, errNotThis
	}
	fh, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	return fh.LinkByIndex(idx)
}

// hasCarrier reports whether nic has a lower layer up (carrier).
func hasCarrier(h *netlink.Handle, nic string) (bool, error) {
	l, err := h.LinkByName(nic)
	if err != nil {
		return false, err
	}
	return l.Attrs().RawFlags&unix.IFF_LOWER_UP != 0, nil
}

// Apply implements Fault.
func (f *NICFlap) Apply(ctx context.Context, t Target, op *Op) (Undo, error) {
	if len(op.Helper) == 0 {
		return nil, errors.New("nic-flap needs the helper process, and none is configured")
	}
	h, err := netlinkAt(t)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	l, err := linkIn(h, t, f.NIC)
	if err != nil {
		return nil, err
	}
	if up, _ := linkUp(h, f.NIC); !up {
		return nil, invalid("%s on %s is down already; a flap needs it up", f.NIC, t)
	}
	// The link the helper toggles: the NIC, or the far end of its veth.
	toggled := link{Target: t, NIC: f.NIC, Index: l.Attrs().Index}
	wentDown := func() (bool, error) { up, err := linkUp(h, f.NIC); return !up, err }
	if f.Mode == FlapCarrier {
		if c, _ := hasCarrier(h, f.NIC); !c {
			return nil, invalid("%s on %s has no carrier already; a flap needs it", f.NIC, t)
		}
		if toggled, err = farEnd(h, t, l); err != nil {
			return nil, err
		}
		wentDown = func() (bool, error) { c, err := hasCarrier(h, f.NIC); return !c, err }
	}
	u := &linkStateUndo{Target: toggled.Target, NIC: toggled.NIC, Index: toggled.Index, WasUp: true, FaultID: op.ID}
	if err := op.Record(u); err != nil {
		return nil, err
	}
	down, up := f.phases()
	argv := append(append([]string(nil), op.Helper...), "flap",
		"-netns", u.Target.netnsName(), "-inode", strconv.FormatUint(u.Target.NetNSInode, 10), "-boot", t.BootID,
		"-nic", u.NIC, "-index", strconv.Itoa(u.Index),
		"-down", down.String(), "-up", up.String(), "-deadline", strconv.FormatInt(op.Deadline.UnixNano(), 10))
	p, release, err := spawn(op.Helper, op.ID, argv)
	if err != nil {
		return u, err
	}
	u.Driver = &p
	if err := op.Record(u); err != nil {
		return u, err
	}
	if err := release(true); err != nil {
		return u, err
	}
	// Read back: the first phase takes the NIC down (or its carrier away). The wait
	// ends as soon as it is down; the bound only matters on a host so busy that the
	// helper takes seconds to start (2 s was seen to pass at load 20).
	const readBack = 15 * time.Second
	deadline := time.Now().Add(readBack)
	for {
		if down, err := wentDown(); err == nil && down {
			return u, nil
		}
		if !p.alive() {
			return u, fmt.Errorf("the flap helper exited at once (see %s)", argv[0])
		}
		if time.Now().After(deadline) {
			return u, fmt.Errorf("read back %s: never went down (%s mode) within %s", f.NIC, cmp.Or(f.Mode, FlapAdmin), readBack)
		}
		select {
		case <-ctx.Done():
			return u, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// RunHelper runs the helper process named by args[0] ("gate", which holds a
// fault's process until its pid is journaled, then execs it; "flap", the nic-flap
// driver; "relay", the delay wire) and returns an exit code. The package's init calls it in processes the
// injector started; commlab's hidden injector-helper subcommand calls it too.
func RunHelper(ctx context.Context, args []string, stderr io.Writer) int {
	if len(args) > 2 && args[0] == "gate" && args[1] == "--" {
		if err := runGate(args[2:]); err != nil {
			fmt.Fprintln(stderr, "injector-helper:", err)
		}
		return 1
	}
	if len(args) == 2 && args[0] == "relay" {
		if err := runWire(ctx, args[1]); err != nil {
			fmt.Fprintln(stderr, "injector-helper relay:", err)
			return 1
		}
		return 0
	}
	if len(args) == 0 || args[0] != "flap" {
		fmt.Fprintln(stderr, "injector-helper: want: gate -- ARGV..., or flap -netns NAME -nic NIC ...")
		return 2
	}
	fs := flag.NewFlagSet("flap", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		nsName, boot, nic   string
		inode               uint64
		index               int
		downFor, upFor      time.Duration
		deadlineUnixNanosec int64
	)
	fs.StringVar(&nsName, "netns", "", "namespace")
	fs.Uint64Var(&inode, "inode", 0, "namespace inode")
	fs.StringVar(&boot, "boot", "", "boot id")
	fs.StringVar(&nic, "nic", "", "NIC")
	fs.IntVar(&index, "index", 0, "NIC ifindex")
	fs.DurationVar(&downFor, "down", time.Second, "down time per period")
	fs.DurationVar(&upFor, "up", time.Second, "up time per period")
	fs.Int64Var(&deadlineUnixNanosec, "deadline", 0, "deadline, unix ns")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if err := ValidNIC(nic); err != nil || validNetNS(nsName) != nil || downFor <= 0 || upFor <= 0 {
		fmt.Fprintln(stderr, "injector-helper flap: bad arguments")
		return 2
	}
	ctx, stop := signal.NotifyContext(ctx, unix.SIGTERM, unix.SIGINT, unix.SIGHUP)
	defer stop()
	ctx, cancel := context.WithDeadline(ctx, time.Unix(0, deadlineUnixNanosec))
	defer cancel()
	t := Target{NetNS: nsName, NetNSInode: inode, BootID: boot}
	if err := flap(ctx, t, nic, index, downFor, upFor); err != nil {
		fmt.Fprintln(stderr, "injector-helper flap:", err)
		return 1
	}
	return 0
}

// flap toggles the NIC until ctx ends, then leaves it up.
func flap(ctx context.Context, t Target, nic string, index int, downFor, upFor time.Duration) error {
	h, err := netlinkAt(t)
	if errors.Is(err, errGone) {
		return nil
	}
	if err != nil {
		return err
	}
	defer h.Close()
	set := func(up bool) error {
		l, err := h.LinkByName(nic)
		if err != nil {
			return err
		}
		if l.Attrs().Index != index {
			return errGone
		}
		if up {
			return h.LinkSetUp(l)
		}
		return h.LinkSetDown(l)
	}
	defer set(true) //nolint:errcheck // best effort; the revert sets it up too
	for {
		if err := set(false); err != nil {
			return ignoreGone(err)
		}
		if !sleepCtx(ctx, downFor) {
			return nil
		}
		if err := set(true); err != nil {
			return ignoreGone(err)
		}
		if !sleepCtx(ctx, upFor) {
			return nil
		}
	}
}
