package injector

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Congestion makes competing flows converge on one node (incast): iperf3 senders
// in other nodes of the sandbox push traffic at a chosen rate each to iperf3
// servers on the target node's NIC, through whatever switch lies between. The
// processes are tagged with the fault id, journaled by pid and placed in their
// node's cgroup; the revert kills them.
type Congestion struct {
	NIC     string `json:"nic" param:"nic,required" doc:"receiving NIC of the target node, e.g. rdma0"`
	Senders Names  `json:"senders" param:"senders,required" doc:"sending nodes of the same sandbox, e.g. n2,n3"`
	Rate    Rate   `json:"rate" param:"rate,required" doc:"rate of each sender, 1mbit to 100gbit"`
	Proto   string `json:"proto" param:"proto" doc:"tcp or udp"`
	Port    int    `json:"port" param:"port" doc:"first iperf3 port on the receiver; sender i uses port+i"`
}

var _ Fault = (*Congestion)(nil)

// CongestionKind registers congestion.
func CongestionKind() Kind {
	return Kind{Name: "congestion", Summary: "N senders push competing flows into one receiver (iperf3)",
		Needs: []Feature{NeedIperf3}, FixedDeadline: true,
		New: func() Fault { return &Congestion{Proto: "tcp", Port: 5301} }, NewUndo: func() Undo { return &procsUndo{} }}
}

// Kind implements Fault.
func (f *Congestion) Kind() string { return "congestion" }

// Validate implements Fault.
func (f *Congestion) Validate() error {
	if err := ValidNIC(f.NIC); err != nil {
		return err
	}
	if len(f.Senders) == 0 || len(f.Senders) > 16 {
		return invalid("senders: want 1 to 16 node names")
	}
	seen := map[string]bool{}
	for _, s := range f.Senders {
		if err := ValidNode(s); err != nil {
			return err
		}
		if seen[s] {
			return invalid("senders: %s is listed twice", s)
		}
		seen[s] = true
	}
	if f.Rate < 1_000_000 || f.Rate > MaxRate {
		return invalid("rate %s: want 1mbit to %s per sender", f.Rate, MaxRate)
	}
	if f.Proto != "tcp" && f.Proto != "udp" {
		return invalid("proto %q: want tcp or udp", f.Proto)
	}
	if f.Port < 1024 || f.Port+len(f.Senders)-1 > 65535 {
		return invalid("port %d: want 1024 to %d", f.Port, 65536-len(f.Senders))
	}
	return nil
}

func (f *Congestion) nics() []string { return []string{f.NIC} }

func (f *Congestion) claims() []string {
	var c []string
	for i := range f.Senders {
		c = append(c, "port:"+strconv.Itoa(f.Port+i))
	}
	return c
}

// Command implements Fault.
func (f *Congestion) Command(t Target) []string {
	udp := ""
	if f.Proto == "udp" {
		udp = " -u"
	}
	var out []string
	for i, s := range f.Senders {
		out = append(out,
			fmt.Sprintf("(on %s) iperf3 -s -p %d &", t.Node, f.Port+i),
			fmt.Sprintf("(on %s) iperf3 -c <%s address of %s> -p %d -b %s -t <ttl>%s &", s, f.NIC, t.Node, f.Port+i, f.Rate, udp))
	}
	return out
}

// nodeCgroup is the workload cgroup of another node of t's sandbox, assuming
// the labs layout commlab/<sandbox>/<node>; other layouts use t's own cgroup.
func nodeCgroup(t Target, node string) string {
	if t.Cgroup == "" || path.Base(t.Cgroup) != t.Node {
		return t.Cgroup
	}
	return path.Join(path.Dir(t.Cgroup), node)
}

// waitListen waits until process p listens on TCP port (read from its own
// namespace's /proc/<pid>/net/tcp*).
func waitListen(ctx context.Context, p Proc, port int, d time.Duration) error {
	want := fmt.Sprintf(":%04X ", port)
	deadline := time.Now().Add(d)
	for {
		for _, file := range []string{"tcp", "tcp6"} {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", p.PID, file))
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(b), "\n")[1:] {
				f := strings.Fields(line)
				// local_address is field 1, st is field 3 (0A = LISTEN).
				if len(f) > 3 && strings.HasSuffix(f[1]+" ", want) && f[3] == "0A" {
					return nil
				}
			}
		}
		if !p.alive() {
			return fmt.Errorf("iperf3 server on port %d exited (port in use?)", port)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("iperf3 server on port %d not listening after %s", port, d)
		}
		if !sleepCtx(ctx, 5*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// procsUndo kills the processes a fault started.
type procsUndo struct {
	FaultID string `json:"fault_id"`
	BootID  string `json:"boot_id"`
	Procs   []Proc `json:"procs,omitempty"`
}

// Revert implements Undo.
func (u *procsUndo) Revert(ctx context.Context) error {
	if u.FaultID == "" {
		return errors.New("journaled process undo has no fault id")
	}
	return stopProcs(ctx, u.FaultID, u.BootID, u.Procs, syscall.SIGKILL, 0)
}

// Flows is what the senders' streams arrive as at the receiver: the protocol and the
// ports, sender i on the range's i-th port (for grading what still gets through).
func (f *Congestion) Flows() (proto string, ports PortRange) {
	return f.Proto, PortRange{uint16(f.Port), uint16(f.Port + len(f.Senders) - 1)}
}
