package injector

import (
	"fmt"
	"time"

	"github.com/cilium/ebpf/asm"
)

// The wire delays what a NIC sends where sch_netem is missing. A tc program at
// the NIC's clsact egress redirects every frame to one end of a veth pair made
// for the fault; a helper process reads the frames from the other end with an
// AF_PACKET socket, holds each until its time (delay plus a uniform draw in
// ±jitter, in arrival order), and sends it out of the NIC with a second AF_PACKET
// socket whose mark the program lets pass. Both sockets use PACKET_VNET_HDR, so
// GSO frames and CHECKSUM_PARTIAL travel through unchanged. The frames then meet
// the NIC's root qdisc (the lab's tbf) as before: the delay adds to the link's
// rate limit.

// wireMark marks the wire's own frames (skb->mark, from SO_MARK); below 1<<31
// so the program compares it as an immediate.
const wireMark = 0x636c7772

// wireProgram redirects every frame not marked by the wire to the egress of the
// veth with index to.
func wireProgram(to int) asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, 8, asm.Word), // __sk_buff.mark
		asm.JEq.Imm(asm.R2, wireMark, "pass"),
		asm.Mov.Imm(asm.R1, int32(to)),
		asm.Mov.Imm(asm.R2, 0), // egress of the target
		asm.FnRedirect.Call(),  // TC_ACT_REDIRECT
		asm.Return(),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("pass"), // TC_ACT_OK
		asm.Return(),
	}
}

// wireVeth names the ends of a fault's veth pair ("a" gets the redirected
// frames, the helper reads "b"); neutral, as `ip link` lists them.
func wireVeth(id, end string) string { return "cl-" + id[1:] + end }

// wireConfig is what the helper needs; it travels as one JSON argument.
type wireConfig struct {
	Target   Target        `json:"t"`
	NIC      string        `json:"n"`
	Index    int           `json:"i"`
	In       int           `json:"a"` // veth end the program redirects to
	Out      int           `json:"b"` // veth end the helper reads
	Delay    time.Duration `json:"d"`
	Jitter   time.Duration `json:"j"`
	Deadline int64         `json:"e"` // unix ns
}

// wireUndo stops the helper, removes the program's filter (and clsact if the
// fault added it) and deletes the veth pair.
type wireUndo struct {
	Target    Target `json:"target"`
	NIC       string `json:"nic"`
	Index     int    `json:"index"`
	Veth      string `json:"veth"`
	OwnClsact bool   `json:"own_clsact,omitempty"`
	FaultID   string `json:"fault_id"`
	Driver    *Proc  `json:"driver,omitempty"`
}

// delayUndo reverts delay and jitter: netem's root qdisc or the wire.
type delayUndo struct {
	Netem *nicRateUndo `json:"netem,omitempty"`
	Wire  *wireUndo    `json:"wire,omitempty"`
}

func wireCommand(nic string, delay, jitter Duration) []string {
	j := ""
	if jitter > 0 {
		j = " ± " + time.Duration(jitter).String() + " (uniform)"
	}
	return []string{
		fmt.Sprintf("ip link add <a> type veth peer name <b>; tc qdisc add dev %s clsact", nic),
		fmt.Sprintf("tc filter add dev %s egress prio %d bpf direct-action obj redirect.o  # every frame to <a>, except those marked by the wire", nic, ownPrio),
		fmt.Sprintf("wire: AF_PACKET read on <b>, hold %s%s, AF_PACKET send on %s", time.Duration(delay), j, nic),
	}
}
