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

// NICFlap takes a NIC down and up again, period after period, until reverted or
// until its deadline. A detached helper process drives it (journaled by pid and
// tagged with the fault id), so the flapping neither dies with the process that
// applied it nor outlives its revert; the revert stops the helper and sets the
// link up, also when the helper was killed while it was down.
//
// Mode admin sets the NIC itself down: the kernel drops its routes, so connects
// fail at once with ENETUNREACH (which NCCL does not retry). Mode carrier sets
// the far end of the NIC's veth down, as a pulled cable or a dead optic does: the
// NIC stays administratively UP with NO-CARRIER (state DOWN), its routes stay
// (marked linkdown), ARP fails, and connects fail after about 3 s with
// EHOSTUNREACH or time out, which NCCL retries.
type NICFlap struct {
	NIC    string   `json:"nic" param:"nic,required" doc:"NIC inside the node, e.g. rdma1"`
	Period Duration `json:"period" param:"period" doc:"length of one down+up cycle, 200ms to 1h"`
	Duty   Percent  `json:"duty" param:"duty" doc:"share of each period the link is down, 1% to 99%"`
	Mode   string   `json:"mode,omitempty" param:"mode" doc:"admin (ip link set down on the NIC, the default) or carrier (the far end of its veth goes down: NO-CARRIER, routes kept)"`
}

// Flap modes.
const (
	FlapAdmin   = "admin"
	FlapCarrier = "carrier"
)

var _ Fault = (*NICFlap)(nil)

// NICFlapKind registers nic-flap.
func NICFlapKind() Kind {
	return Kind{Name: "nic-flap", Summary: "take a NIC down and up periodically until reverted",
		New: func() Fault {
			return &NICFlap{Period: Duration(10 * time.Second), Duty: 5000}
		}, NewUndo: func() Undo { return &linkStateUndo{} }}
}

// Kind implements Fault.
func (f *NICFlap) Kind() string { return "nic-flap" }

// Validate implements Fault.
func (f *NICFlap) Validate() error {
	if err := ValidNIC(f.NIC); err != nil {
		return err
	}
	if p := time.Duration(f.Period); p < 200*time.Millisecond || p > time.Hour {
		return invalid("period %s: want 200ms to 1h", p)
	}
	if f.Duty < 100 || f.Duty > 9900 {
		return invalid("duty %s: want 1%% to 99%%", f.Duty)
	}
	if f.Mode != "" && f.Mode != FlapAdmin && f.Mode != FlapCarrier {
		return invalid("mode %q: want admin or carrier", f.Mode)
	}
	return nil
}

func (f *NICFlap) nics() []string   { return []string{f.NIC} }
func (f *NICFlap) claims() []string { return []string{"state:" + f.NIC} }

func (f *NICFlap) phases() (down, up time.Duration) {
	p := time.Duration(f.Period)
	down = time.Duration(float64(p) * f.Duty.Fraction())
	return down, p - down
}

// Command implements Fault. In carrier mode it names the far end it toggles
// (from the host: ip -n <fabric namespace>).
func (f *NICFlap) Command(t Target) []string {
	down, up := f.phases()
	ip := "ip link set dev " + f.NIC
	if f.Mode == FlapCarrier {
		ip = "ip link set dev <far end of " + f.NIC + "'s veth>"
		if h, err := netlinkAt(t); err == nil {
			if l, err := h.LinkByName(f.NIC); err == nil {
				if far, err := farEnd(h, t, l); err == nil {
					ip = fmt.Sprintf("ip -n %s link set dev %s", far.Target.netnsName(), far.NIC)
				}
			}
			h.Close()
		}
	}
	return []string{fmt.Sprintf("while :; do %s down; sleep %g; %s up; sleep %g; done",
		ip, down.Seconds(), ip, up.Seconds())}
}

// link is a NIC in a namespace, identified by name and index.
type link struct {
	Target Target
	NIC    string
	Index  int
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

var errNotThis = errors.New("not this namespace")

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

// Helper processes: the injector starts its own executable with argv[1] =
// helperArg and helperEnv=1; init then runs RunHelper instead of the program.
const (
	helperEnv = "COMMLAB_INJECTOR_HELPER"
	helperArg = "injector-helper"
)

// init turns any binary that links this package into the injector's helper when
// the injector started it as one: the commlab binary, and the test binaries of
// every package that applies faults, need no wiring of their own.
func init() {
	if os.Getenv(helperEnv) != "1" || len(os.Args) < 2 || os.Args[1] != helperArg {
		return
	}
	os.Exit(RunHelper(context.Background(), os.Args[2:], os.Stderr))
}

// RunHelper runs the helper process named by args[0] ("gate", which holds a
// fault's process until its pid is journaled, then execs it; "flap", the nic-flap
// driver) and returns an exit code. The package's init calls it in processes the
// injector started; commlab's hidden injector-helper subcommand calls it too.
func RunHelper(ctx context.Context, args []string, stderr io.Writer) int {
	if len(args) > 2 && args[0] == "gate" && args[1] == "--" {
		if err := runGate(args[2:]); err != nil {
			fmt.Fprintln(stderr, "injector-helper:", err)
		}
		return 1
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

func ignoreGone(err error) error {
	if isGone(err) {
		return nil
	}
	return err
}

// sleepCtx sleeps d unless ctx ends first; it reports whether it slept fully.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
