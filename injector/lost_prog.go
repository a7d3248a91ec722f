package injector

import (
	"encoding/binary"

	"github.com/cilium/ebpf/asm"
)

// lostOnWire selects the frames an outbound loss or roce-drop fault makes vanish
// after they left the NIC, as on a lossy cable: the program rewrites their
// destination MAC to the NIC's own, which the receiver (or the switch, which
// never sends a frame back out of its ingress port) discards. The sender's tx
// counters count the frame and its socket is told nothing. A plain drop at
// egress (TC_ACT_SHOT, an nftables drop) would be reported to the sending socket
// (NET_XMIT_DROP, ENOBUFS), and ping or TCP would just resend the packet without
// ever seeing loss. nftables cannot do the rewrite here: in a network namespace
// owned by a non-init user namespace (every lab node's, see
// hostns.CreateConfined) the kernel refuses its payload writes, even from host
// root.
type lostOnWire struct {
	// Below is the share as a threshold on bpf_get_prandom_u32, as in bitFlip;
	// 1<<32 takes every matching frame.
	Below uint64
	MAC   [6]byte // the NIC's own address
	// RoCE takes only RoCEv2 frames (UDP to 4791): IPv4 of any header length that
	// is not a later fragment, and IPv6 whose next header is UDP, as nftables'
	// `meta l4proto udp th dport 4791` reads them (nftables also skips IPv6
	// extension headers; RoCEv2 sends none).
	RoCE bool
}

// Stack layout of the program (offsets from r10, aligned as the verifier wants).
const (
	lwMAC     = -8  // the NIC's address, 6 bytes
	lwEthType = -16 // EtherType, then the UDP destination port
	lwIP      = -32 // IPv4 bytes 0-9, or the IPv6 next header
	lwFrag    = lwIP + 6
	lwProto   = lwIP + 9
)

// Wire values as they read on a little-endian load.
const (
	ethPIPv6LE   = 0xdd86 // ETH_P_IPV6
	fragOffLE    = 0xff1f // IPv4 fragment offset (without MF: a first fragment carries the UDP header)
	roceV2PortLE = roceV2Port>>8 | roceV2Port&0xff<<8
)

// program returns the tc direct-action program; every frame continues (TC_ACT_OK).
func (w lostOnWire) program() asm.Instructions {
	const pass = "pass"
	// load copies n bytes at frame offset r2 to the stack.
	load := func(stack int16, n int32) asm.Instructions {
		return asm.Instructions{
			asm.Mov.Reg(asm.R1, asm.R6),
			asm.Mov.Reg(asm.R3, asm.R10),
			asm.Add.Imm(asm.R3, int32(stack)),
			asm.Mov.Imm(asm.R4, n),
			asm.FnSkbLoadBytes.Call(),
			asm.JNE.Imm(asm.R0, 0, pass),
		}
	}
	p := randomShare(w.Below, pass)
	if w.RoCE {
		p = append(p, asm.Mov.Imm(asm.R2, 12))
		p = append(p, load(lwEthType, 2)...)
		p = append(p,
			loadStack(asm.R1, lwEthType, asm.Half),
			asm.JEq.Imm(asm.R1, ethPIPLE, "ipv4"),
			asm.JNE.Imm(asm.R1, ethPIPv6LE, pass),
			asm.Mov.Imm(asm.R2, 14+6)) // IPv6 next header
		p = append(p, load(lwIP, 1)...)
		p = append(p,
			loadStack(asm.R1, lwIP, asm.Byte),
			asm.JNE.Imm(asm.R1, 17, pass), // IPPROTO_UDP
			asm.Mov.Imm(asm.R7, 14+40),    // r7: UDP header offset
			asm.Ja.Label("udp"),
			asm.Mov.Imm(asm.R2, 14).WithSymbol("ipv4"))
		p = append(p, load(lwIP, 10)...)
		p = append(p,
			loadStack(asm.R1, lwIP, asm.Byte),
			asm.Mov.Reg(asm.R7, asm.R1),
			asm.RSh.Imm(asm.R7, 4),
			asm.JNE.Imm(asm.R7, 4, pass),
			asm.And.Imm(asm.R1, 0xf),
			asm.JLT.Imm(asm.R1, 5, pass),
			asm.LSh.Imm(asm.R1, 2),
			loadStack(asm.R2, lwFrag, asm.Half),
			asm.And.Imm(asm.R2, fragOffLE),
			asm.JNE.Imm(asm.R2, 0, pass),
			loadStack(asm.R2, lwProto, asm.Byte),
			asm.JNE.Imm(asm.R2, 17, pass),
			asm.Mov.Reg(asm.R7, asm.R1),
			asm.Add.Imm(asm.R7, 14),
			asm.Mov.Reg(asm.R2, asm.R7).WithSymbol("udp"),
			asm.Add.Imm(asm.R2, 2)) // UDP destination port
		p = append(p, load(lwEthType, 2)...)
		p = append(p,
			loadStack(asm.R1, lwEthType, asm.Half),
			asm.JNE.Imm(asm.R1, roceV2PortLE, pass))
	}
	m := w.MAC
	p = append(p,
		asm.StoreImm(asm.R10, lwMAC, int64(int32(binary.LittleEndian.Uint32(m[:4]))), asm.Word),
		asm.StoreImm(asm.R10, lwMAC+4, int64(binary.LittleEndian.Uint16(m[4:])), asm.Half),
		// bpf_skb_store_bytes(skb, 0, mac, 6, 0): the Ethernet destination.
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, 0),
		asm.Mov.Reg(asm.R3, asm.R10),
		asm.Add.Imm(asm.R3, lwMAC),
		asm.Mov.Imm(asm.R4, 6),
		asm.Mov.Imm(asm.R5, 0),
		asm.FnSkbStoreBytes.Call(),
		asm.Mov.Imm(asm.R0, 0).WithSymbol(pass), // TC_ACT_OK
		asm.Return(),
	)
	return p
}
