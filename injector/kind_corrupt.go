package injector

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netlink"
)

// Corrupt damages a share of a NIC's packets the way a bad NIC, cable or
// memory does: silently. By default (via=bpf) a tc program at the NIC's clsact
// flips one bit in the TCP/UDP/ICMP payload of matching IPv4 packets and fixes
// the L4 checksum, so the damaged bytes reach the application. via=netem uses
// netem's corrupt instead (outbound only, any bit of the frame, checksums left
// wrong, so TCP drops most of it): that is loss, not silent corruption.
type Corrupt struct {
	NIC       string     `json:"nic" param:"nic,required" doc:"NIC inside the node, e.g. rdma0"`
	Percent   Percent    `json:"percent" param:"percent,required" doc:"share of matching packets damaged, 0.01% to 100%"`
	Direction Direction  `json:"direction" param:"direction" doc:"in (packets the NIC receives), out (packets it sends) or both"`
	Proto     string     `json:"proto,omitempty" param:"proto" doc:"tcp, udp, icmp or any (default: all three)"`
	Port      int        `json:"port,omitempty" param:"port" doc:"only packets from or to this port, e.g. 4791 (RoCEv2); 0 for any"`
	Peer      netip.Addr `json:"peer,omitzero" param:"peer" doc:"only packets from or to this IPv4 address"`
	Skip      int        `json:"skip,omitempty" param:"skip" doc:"payload bytes left intact at its start (a transport header the NIC writes), even, 0 to 1024"`
	Via       string     `json:"via,omitempty" param:"via" doc:"bpf (default: bit flip in the payload, checksum fixed) or netem (where sch_netem exists; checksum left wrong)"`
}

var _ Fault = (*Corrupt)(nil)

// CorruptKind registers corrupt.
func CorruptKind() Kind {
	return Kind{Name: "corrupt", Summary: "flip bits in a share of a NIC's packets' payload, checksums fixed (tc BPF; or netem)",
		New: func() Fault { return &Corrupt{Direction: DirIn} }, NewUndo: func() Undo { return &corruptUndo{} }}
}

// Kind implements Fault.
func (f *Corrupt) Kind() string { return "corrupt" }

func (f *Corrupt) netem() bool { return f.Via == "netem" }

// Validate implements Fault.
func (f *Corrupt) Validate() error {
	if err := ValidNIC(f.NIC); err != nil {
		return err
	}
	if f.Percent < 1 || f.Percent > 10000 {
		return invalid("percent %s: want 0.01%% to 100%%", f.Percent)
	}
	if !f.Direction.valid() {
		return invalid("direction %q: want in, out or both", f.Direction)
	}
	switch f.Proto {
	case "", "any", "tcp", "udp", "icmp":
	default:
		return invalid("proto %q: want tcp, udp, icmp or any", f.Proto)
	}
	if f.Proto == "icmp" && f.Port != 0 {
		return invalid("port %d: ICMP has no ports", f.Port)
	}
	if f.Port < 0 || f.Port > 65535 {
		return invalid("port %d: want 1 to 65535, or 0 for any", f.Port)
	}
	if f.Skip < 0 || f.Skip > 1024 || f.Skip%2 != 0 {
		return invalid("skip %d: want an even number of bytes, 0 to 1024", f.Skip)
	}
	if f.Peer.IsValid() && !f.Peer.Is4() {
		return invalid("peer %s: want an IPv4 address (the program matches IPv4 only)", f.Peer)
	}
	switch f.Via {
	case "", "bpf":
	case "netem":
		if f.Direction != DirOut || f.Proto != "" && f.Proto != "any" || f.Port != 0 || f.Peer.IsValid() || f.Skip != 0 {
			return invalid("via netem: netem corrupts every packet the NIC sends; it takes direction=out and no proto, port, peer or skip")
		}
	default:
		return invalid("via %q: want bpf or netem", f.Via)
	}
	return nil
}

func (f *Corrupt) nics() []string { return []string{f.NIC} }

func (f *Corrupt) claims() []string {
	if f.netem() {
		return []string{"qdisc-root:" + f.NIC}
	}
	var c []string
	if f.Direction.In() {
		c = append(c, "ingress:"+f.NIC)
	}
	if f.Direction.Out() {
		c = append(c, "egress-filter:"+f.NIC)
	}
	return c
}

func (f *Corrupt) flip() bitFlip {
	b := bitFlip{Below: uint64(f.Percent) << 32 / 10000, Peer: f.Peer}
	switch f.Proto {
	case "tcp":
		b.Proto = 6 // IPPROTO_TCP
	case "udp":
		b.Proto = 17 // IPPROTO_UDP
	case "icmp":
		b.Proto = 1 // IPPROTO_ICMP
	}
	b.Port, b.Skip = uint16(f.Port), uint16(f.Skip)
	return b
}

// Command implements Fault.
func (f *Corrupt) Command(Target) []string {
	if f.netem() {
		return netemCommand(f.NIC, "corrupt "+f.Percent.String())
	}
	var match []string
	if f.Proto != "" && f.Proto != "any" {
		match = append(match, f.Proto)
	}
	if f.Port != 0 {
		match = append(match, fmt.Sprintf("port %d", f.Port))
	}
	if f.Peer.IsValid() {
		match = append(match, "host "+f.Peer.String())
	}
	if f.Skip != 0 {
		match = append(match, fmt.Sprintf("(payload after its first %d bytes)", f.Skip))
	}
	what := "TCP/UDP/ICMP"
	if len(match) > 0 {
		what = strings.Join(match, " ")
	}
	out := []string{fmt.Sprintf("tc qdisc add dev %s clsact", f.NIC)}
	for _, d := range f.directions() {
		out = append(out, fmt.Sprintf("tc filter add dev %s %s prio %d bpf direct-action obj flip.o  # %s of IPv4 %s packets: one payload bit flipped, L4 checksum fixed (bpf_l4_csum_replace)",
			f.NIC, d.name, ownPrio, f.Percent, what))
	}
	return out
}

// tcHook is one side of clsact.
type tcHook struct {
	name   string // as tc writes it
	parent uint32
}

var (
	hookIn  = tcHook{"ingress", clsactIn}
	hookOut = tcHook{"egress", clsactOut}
)

// clsactOut is the parent of clsact's egress filters (ffff:fff3).
const clsactOut = 0xfffffff3

func (f *Corrupt) directions() []tcHook {
	var hs []tcHook
	if f.Direction.In() {
		hs = append(hs, hookIn)
	}
	if f.Direction.Out() {
		hs = append(hs, hookOut)
	}
	return hs
}

// tcProgName names the filter and program as `tc filter show` and bpftool list
// them; it is neutral, as a learner may list them before the debrief.
const tcProgName = "commlab_tc"

// loadTCProg loads a tc direct-action program; a kernel without BPF (or
// refusing it) gets ErrUnsupported with the reason.
func loadTCProg(insns asm.Instructions) (*ebpf.Program, error) {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: tcProgName, Type: ebpf.SchedCLS, Instructions: insns, License: "Dual MIT/GPL"})
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("%w: the kernel refused commlab's tc BPF program: %+v", ErrUnsupported, ve)
		}
		return nil, fmt.Errorf("%w: cannot load a tc BPF program (BPF syscall, CAP_BPF): %v", ErrUnsupported, err)
	}
	return prog, nil
}

var (
	tcBPFOnce sync.Once
	tcBPFErr  error
)

// TCBPF reports whether this host loads commlab's tc BPF programs (checked once
// by loading one; attaching also needs clsact and cls_bpf, which Apply reports).
func TCBPF() error {
	tcBPFOnce.Do(func() {
		p, err := loadTCProg(bitFlip{Below: 1, Proto: 17 /* UDP */, Port: 9, Peer: netip.MustParseAddr("192.0.2.1")}.program())
		if err == nil {
			p.Close()
		}
		tcBPFErr = err
	})
	return tcBPFErr
}

// ownFilters lists commlab's (priority c1) filters under parent on l.
func ownFilters(h *netlink.Handle, l netlink.Link, parent uint32) ([]netlink.Filter, error) {
	fs, err := h.FilterList(l, parent)
	if err != nil && !isGone(err) && !errors.Is(err, syscall.EINVAL) {
		return nil, fmt.Errorf("list filters on %s: %w", l.Attrs().Name, err)
	}
	var own []netlink.Filter
	for _, f := range fs {
		if f.Attrs().Priority == ownPrio {
			own = append(own, f)
		}
	}
	return own, nil
}

// tcFilterUndo removes a fault's BPF filters (commlab's, priority c1) at its
// clsact parents on a NIC, and the clsact qdisc when the fault added it and
// nothing else uses it. Corrupt, the wire and outbound loss use it.
type tcFilterUndo struct {
	Target    Target   `json:"target"`
	NIC       string   `json:"nic,omitempty"`
	Index     int      `json:"index,omitempty"`
	Parents   []uint32 `json:"parents,omitempty"`
	OwnClsact bool     `json:"own_clsact,omitempty"`
}

// corruptUndo reverts corrupt: its BPF filters, or the netem variant.
type corruptUndo struct {
	tcFilterUndo
	Netem *nicRateUndo `json:"netem,omitempty"`
}
