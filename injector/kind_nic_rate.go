package injector

import (
	"fmt"
	"hash/fnv"

	"github.com/vishvananda/netlink"

	"github.com/commlab/commlab/internal/host"
)

// NICRate limits a NIC's rate with tbf. Outbound, a tbf c2: becomes the NIC's
// root qdisc, replacing the lab's base tbf c1: (journaled and put back on
// revert). Inbound, the NIC's arriving traffic is redirected (clsact, u32,
// mirred) to an ifb device cl-i<nic> shaped by a tbf, since a qdisc only shapes
// what it sends.
type NICRate struct {
	NIC       string    `json:"nic" param:"nic,required" doc:"NIC inside the node, e.g. rdma0"`
	Rate      Rate      `json:"rate" param:"rate,required" doc:"rate with a unit, 8kbit to 100gbit, e.g. 100mbit"`
	Direction Direction `json:"direction" param:"direction" doc:"out (what the NIC sends), in (what it receives, through an ifb) or both"`
	Qdisc     string    `json:"qdisc" param:"qdisc" doc:"tbf, or htb (one class c2:1 at the rate, the default class)"`
}

var _ Fault = (*NICRate)(nil)

// Rate bounds for nic-rate: tbf below 8 kbit/s cannot pass a frame a second.
const (
	MinRate Rate = 8_000
	MaxRate Rate = 100_000_000_000
)

// NICRateKind registers nic-rate.
func NICRateKind() Kind {
	return Kind{Name: "nic-rate", Summary: "limit a NIC's rate with tbf (egress; ingress through an ifb)",
		Needs: []Feature{NeedTBF},
		New:   func() Fault { return &NICRate{Direction: DirOut, Qdisc: "tbf"} }, NewUndo: func() Undo { return &nicRateUndo{} }}
}

// Kind implements Fault.
func (f *NICRate) Kind() string { return "nic-rate" }

// Validate implements Fault.
func (f *NICRate) Validate() error {
	if err := ValidNIC(f.NIC); err != nil {
		return err
	}
	if f.Rate < MinRate || f.Rate > MaxRate {
		return invalid("rate %s: want between %s and %s", f.Rate, MinRate, MaxRate)
	}
	if !f.Direction.valid() {
		return invalid("direction %q: want in, out or both", f.Direction)
	}
	if f.Qdisc != "tbf" && f.Qdisc != "htb" {
		return invalid("qdisc %q: want tbf or htb", f.Qdisc)
	}
	return nil
}

func (f *NICRate) nics() []string { return []string{f.NIC} }

func (f *NICRate) claims() []string {
	var c []string
	if f.Direction.Out() {
		c = append(c, "qdisc-root:"+f.NIC)
	}
	if f.Direction.In() {
		c = append(c, "ingress:"+f.NIC)
	}
	return c
}

// ifbName is the ifb device that shapes nic's inbound traffic.
func ifbName(nic string) string {
	if n := "cl-i" + nic; len(n) <= 15 {
		return n
	}
	h := fnv.New32a()
	h.Write([]byte(nic))
	return fmt.Sprintf("cl-i%08x", h.Sum32())
}

// Command implements Fault.
func (f *NICRate) Command(t Target) []string {
	burst, limit := tbfSizing(f.Rate.BytesPerSecond(), 1500)
	shape := func(dev string) []string {
		if f.Qdisc == "htb" {
			return []string{
				fmt.Sprintf("tc qdisc replace dev %s root handle c2: htb default 1", dev),
				fmt.Sprintf("tc class add dev %s parent c2: classid c2:1 htb rate %s ceil %s burst %db cburst %db", dev, f.Rate, f.Rate, burst, burst)}
		}
		return []string{fmt.Sprintf("tc qdisc replace dev %s root handle c2: tbf rate %s burst %db limit %db", dev, f.Rate, burst, limit)}
	}
	var out []string
	if f.Direction.Out() {
		out = append(out, shape(f.NIC)...)
	}
	if f.Direction.In() {
		ifb := ifbName(f.NIC)
		out = append(out, fmt.Sprintf("ip link add %s type ifb && ip link set %s up", ifb, ifb))
		out = append(out, shape(ifb)...)
		out = append(out,
			fmt.Sprintf("tc qdisc add dev %s clsact", f.NIC),
			fmt.Sprintf("tc filter add dev %s ingress prio %d u32 match u32 0 0 action mirred egress redirect dev %s", f.NIC, ownPrio, ifb))
	}
	return out
}

type nicRateUndo struct {
	Target    Target `json:"target"`
	NIC       string `json:"nic"`
	Index     int    `json:"index"`
	Egress    bool   `json:"egress,omitempty"`
	Ingress   bool   `json:"ingress,omitempty"`
	IFB       string `json:"ifb,omitempty"`
	OwnClsact bool   `json:"own_clsact,omitempty"`
	// TxQLen is the NIC's queue length before: the kernel raises a zero queue
	// length (veth) to 1000 when a queueing qdisc is attached.
	TxQLen int `json:"txqlen"`
	// Prior is the root qdisc the fault replaced (Egress only).
	Prior priorRoot `json:"prior"`
}

// delLinkNamed deletes a cl- link of type typ if it exists.
func delLinkNamed(h *netlink.Handle, name, typ string) error {
	if len(name) <= len(host.Prefix) || name[:len(host.Prefix)] != host.Prefix {
		return fmt.Errorf("refusing to delete link %q: not a commlab device", name)
	}
	l, err := h.LinkByName(name)
	if isGone(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("find %s: %w", name, err)
	}
	if l.Type() != typ {
		return fmt.Errorf("refusing to delete %s: it is a %s, not the %s commlab made", name, l.Type(), typ)
	}
	if err := h.LinkDel(l); err != nil && !isGone(err) {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	return nil
}
