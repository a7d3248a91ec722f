package injector

import (
	"fmt"
	"time"
)

// Delay and Jitter use sch_netem where the kernel has it; where it does not (this
// project's CI kernel) they use the userspace wire (kind_wire.go). Corrupt (see
// kind_corrupt.go) uses netem only when asked to (via=netem).

// Delay adds latency (and optionally jitter) to what a NIC sends (netem, root c2:).
type Delay struct {
	NIC    string   `json:"nic" param:"nic,required" doc:"NIC inside the node, e.g. rdma0"`
	Delay  Duration `json:"delay" param:"delay,required" doc:"added one-way delay, 10us to 10s"`
	Jitter Duration `json:"jitter" param:"jitter" doc:"random variation around the delay, at most the delay"`
}

// Jitter varies the latency of what a NIC sends around a base delay (netem).
type Jitter struct {
	NIC    string   `json:"nic" param:"nic,required" doc:"NIC inside the node, e.g. rdma0"`
	Jitter Duration `json:"jitter" param:"jitter,required" doc:"random variation of the delay, 10us to 10s"`
	Delay  Duration `json:"delay" param:"delay" doc:"base delay (default: the jitter), at least the jitter"`
}

var (
	_ Fault = (*Delay)(nil)
	_ Fault = (*Jitter)(nil)
)

// DelayKind registers delay.
func DelayKind() Kind {
	return Kind{Name: "delay", Summary: "add latency to what a NIC sends (sch_netem, or a userspace wire)", FixedDeadline: true,
		New: func() Fault { return &Delay{} }, NewUndo: func() Undo { return &delayUndo{} }}
}

// JitterKind registers jitter.
func JitterKind() Kind {
	return Kind{Name: "jitter", Summary: "vary the latency of what a NIC sends (sch_netem, or a userspace wire)", FixedDeadline: true,
		New: func() Fault { return &Jitter{} }, NewUndo: func() Undo { return &delayUndo{} }}
}

// Kind implements Fault.
func (f *Delay) Kind() string { return "delay" }

// Kind implements Fault.
func (f *Jitter) Kind() string { return "jitter" }

func checkDelay(what string, d Duration) error {
	if v := time.Duration(d); v < 10*time.Microsecond || v > 10*time.Second {
		return invalid("%s %s: want 10us to 10s", what, v)
	}
	return nil
}

// Validate implements Fault.
func (f *Delay) Validate() error {
	if err := ValidNIC(f.NIC); err != nil {
		return err
	}
	if err := checkDelay("delay", f.Delay); err != nil {
		return err
	}
	if f.Jitter > f.Delay {
		return invalid("jitter %s: at most the delay %s", f.Jitter, f.Delay)
	}
	return nil
}

// Validate implements Fault.
func (f *Jitter) Validate() error {
	if err := ValidNIC(f.NIC); err != nil {
		return err
	}
	if err := checkDelay("jitter", f.Jitter); err != nil {
		return err
	}
	if f.Delay != 0 && f.Delay < f.Jitter {
		return invalid("delay %s: at least the jitter %s", f.Delay, f.Jitter)
	}
	return nil
}

func (f *Delay) nics() []string    { return []string{f.NIC} }
func (f *Jitter) nics() []string   { return []string{f.NIC} }
func (f *Delay) claims() []string  { return delayClaims(f.NIC) }
func (f *Jitter) claims() []string { return delayClaims(f.NIC) }

// delayClaims covers both mechanisms: netem's root qdisc, the wire's egress filter.
func delayClaims(nic string) []string { return []string{"qdisc-root:" + nic, "egress-filter:" + nic} }

func (f *Jitter) base() Duration {
	if f.Delay == 0 {
		return f.Jitter
	}
	return f.Delay
}

func netemCommand(nic, args string) []string {
	return []string{fmt.Sprintf("tc qdisc replace dev %s root handle c2: netem %s", nic, args)}
}

// Command implements Fault.
func (f *Delay) Command(Target) []string {
	if !netemProbed.Load() {
		return wireCommand(f.NIC, f.Delay, f.Jitter)
	}
	args := "delay " + usec(f.Delay)
	if f.Jitter > 0 {
		args += " " + usec(f.Jitter)
	}
	return netemCommand(f.NIC, args)
}

// Command implements Fault.
func (f *Jitter) Command(Target) []string {
	if !netemProbed.Load() {
		return wireCommand(f.NIC, f.base(), f.Jitter)
	}
	return netemCommand(f.NIC, "delay "+usec(f.base())+" "+usec(f.Jitter))
}

func usec(d Duration) string { return fmt.Sprintf("%dus", time.Duration(d).Microseconds()) }
