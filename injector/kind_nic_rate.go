package injector

import (
	"context"
	"errors"
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

// Apply implements Fault.
func (f *NICRate) Apply(ctx context.Context, t Target, op *Op) (Undo, error) {
	h, err := netlinkAt(t)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	l, err := linkIn(h, t, f.NIC)
	if err != nil {
		return nil, err
	}
	idx, mtu := l.Attrs().Index, l.Attrs().MTU
	u := &nicRateUndo{Target: t, NIC: f.NIC, Index: idx, TxQLen: l.Attrs().TxQLen}
	if f.Direction.Out() {
		if u.Prior, err = readPriorRoot(h, l); err != nil {
			return nil, err
		}
		u.Egress = true
		if err := op.Record(u); err != nil {
			return nil, err
		}
		if err := shapeRoot(h, l, f.Qdisc, f.Rate, mtu); err != nil {
			return u, err
		}
	}
	if f.Direction.In() {
		has, err := hasClsact(h, l)
		if err != nil {
			return u, err
		}
		u.Ingress, u.IFB, u.OwnClsact = true, ifbName(f.NIC), !has
		if err := op.Record(u); err != nil {
			return u, err
		}
		ifb := &netlink.Ifb{LinkAttrs: netlink.LinkAttrs{Name: u.IFB, MTU: mtu, TxQLen: 1000}}
		if err := h.LinkAdd(ifb); err != nil {
			return u, fmt.Errorf("add ifb %s: %w", u.IFB, err)
		}
		il, err := h.LinkByName(u.IFB)
		if err != nil {
			return u, fmt.Errorf("find ifb %s: %w", u.IFB, err)
		}
		if err := h.LinkSetUp(il); err != nil {
			return u, fmt.Errorf("set %s up: %w", u.IFB, err)
		}
		if err := shapeRoot(h, il, f.Qdisc, f.Rate, mtu); err != nil {
			return u, err
		}
		if err := addIngressRedirect(h, idx, il.Attrs().Index); err != nil {
			return u, err
		}
	}
	return u, ctx.Err()
}

// shapeRoot makes a tbf, or an htb with one default class, at rate the root
// qdisc (c2:) of l, and reads it back.
func shapeRoot(h *netlink.Handle, l netlink.Link, kind string, rate Rate, mtu int) error {
	name, idx := l.Attrs().Name, l.Attrs().Index
	if kind == "htb" {
		q := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: idx, Parent: netlink.HANDLE_ROOT, Handle: ownQdisc})
		q.Defcls = 1
		if err := h.QdiscReplace(q); err != nil {
			return fmt.Errorf("add htb on %s: %w", name, err)
		}
		burst, _ := tbfSizing(rate.BytesPerSecond(), mtu)
		c := netlink.NewHtbClass(netlink.ClassAttrs{LinkIndex: idx, Parent: ownQdisc, Handle: ownQdisc | 1},
			netlink.HtbClassAttrs{Rate: uint64(rate), Ceil: uint64(rate), Buffer: burst, Cbuffer: burst})
		if err := h.ClassReplace(c); err != nil {
			return fmt.Errorf("add htb class c2:1 on %s: %w", name, err)
		}
		cs, err := h.ClassList(l, ownQdisc)
		if err != nil {
			return fmt.Errorf("read back htb classes on %s: %w", name, err)
		}
		for _, c := range cs {
			if hc, ok := c.(*netlink.HtbClass); ok && hc.Handle == ownQdisc|1 && hc.Rate == rate.BytesPerSecond() {
				return nil
			}
		}
		return fmt.Errorf("read back %s: no htb class c2:1 at %s", name, rate)
	}
	if err := h.QdiscReplace(newTbf(idx, netlink.HANDLE_ROOT, rate, mtu)); err != nil {
		return fmt.Errorf("add tbf on %s: %w", name, err)
	}
	q, err := rootQdisc(h, l)
	if err != nil {
		return err
	}
	tbf, ok := q.(*netlink.Tbf)
	if !ok || tbf.Handle != ownQdisc {
		return fmt.Errorf("read back %s: root qdisc is %v, not commlab's tbf", name, q)
	}
	if tbf.Rate != rate.BytesPerSecond() {
		return fmt.Errorf("read back %s: tbf rate is %d B/s, asked %d B/s", name, tbf.Rate, rate.BytesPerSecond())
	}
	return nil
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

// Revert implements Undo: the ingress filter goes before the ifb it redirects to,
// so no packet is ever redirected to a missing device.
func (u *nicRateUndo) Revert(ctx context.Context) error {
	h, err := netlinkAt(u.Target)
	if errors.Is(err, errGone) {
		return nil
	}
	if err != nil {
		return err
	}
	defer h.Close()
	if l, err := h.LinkByName(u.NIC); err == nil && l.Attrs().Index == u.Index {
		if u.Ingress {
			if err := delIngressRedirect(h, u.Index, u.OwnClsact); err != nil {
				return err
			}
		}
		if u.Egress {
			if err := restoreRoot(h, u.Index, u.Prior); err != nil {
				return err
			}
			if l.Attrs().TxQLen != u.TxQLen && u.TxQLen >= 0 {
				if err := h.LinkSetTxQLen(l, u.TxQLen); err != nil && !isGone(err) {
					return fmt.Errorf("restore %s txqueuelen %d: %w", u.NIC, u.TxQLen, err)
				}
			}
		}
	} else if err != nil && !isGone(err) {
		return fmt.Errorf("find %s: %w", u.NIC, err)
	}
	if u.Ingress {
		if err := delLinkNamed(h, u.IFB, "ifb"); err != nil {
			return err
		}
	}
	return ctx.Err()
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
