package injector

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
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
	return Kind{Name: "nic-flap", Summary: "take a NIC down and up periodically until reverted", FixedDeadline: true,
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
		if far, ok := farEndOf(t, f.NIC); ok {
			ip = fmt.Sprintf("ip -n %s link set dev %s", far.Target.netnsName(), far.NIC)
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

var errNotThis = errors.New("not this namespace")

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
