package injector

import (
	"encoding/binary"
	"net/netip"

	"github.com/cilium/ebpf/asm"
)

// bitFlip selects the packets a corruption program damages. The program is
// assembled per fault with these values as immediates, so it needs no maps and
// no BPF compiler.
type bitFlip struct {
	// Below is the share as a threshold on bpf_get_prandom_u32: a packet is
	// damaged when the draw is below it; 1<<32 damages every matching packet.
	Below uint64
	Proto uint8      // 1 (ICMP), 6 (TCP), 17 (UDP) or 0 for all three
	Port  uint16     // source or destination port, 0 for any
	Peer  netip.Addr // source or destination address, invalid for any
	Skip  uint16     // payload bytes left intact at its start
}

// Stack layout of the program (offsets from r10; the verifier wants aligned
// stack accesses, so the IPv4 header starts 8-aligned at -64).
const (
	stFrame   = -78 // Ethernet (14) + IPv4 header without options (20)
	stEthType = stFrame + 12
	stVerIHL  = stFrame + 14
	stTotLen  = stFrame + 16
	stFrag    = stFrame + 20
	stProto   = stFrame + 23
	stSaddr   = stFrame + 26
	stDaddr   = stFrame + 30
	stDoff    = -36 // TCP data offset byte
	stMask    = -32 // the bit to flip
	stL4      = -24 // first 8 bytes of the TCP or UDP header
	stPayload = -16 // offset of the payload in the frame
	stOld     = -8  // the 16-bit word before
	stNew     = -4  // and after the flip
)

// Helper flags (linux/bpf.h).
const (
	bpfFMarkMangled0 = 1 << 5 // BPF_F_MARK_MANGLED_0: a UDP checksum of 0 stays 0
	ethPIPLE         = 0x0008 // ETH_P_IP as it reads from the wire on a little-endian load
	fragMaskLE       = 0xff3f // IPv4 MF flag and fragment offset, little-endian load
)

// program returns a tc direct-action program that, for a share of the IPv4
// TCP, UDP and ICMP frames matching b, flips one bit of one 16-bit word of the L4 payload
// (ICMP: of the data after the 8-byte header, which echo replies return) and
// fixes the L4 checksum with bpf_l4_csum_replace, so the damage reaches the
// receiving application instead of being dropped. Frames without payload and
// IP fragments pass untouched (a fragment's checksum is in another packet).
// Every frame continues (TC_ACT_OK).
//
// The word sits at an even offset from the L4 header, as the Internet checksum
// sums 16-bit words; under CHECKSUM_PARTIAL (offload, veth) the kernel leaves the
// field alone and the checksum is computed later over the damaged data.
func (b bitFlip) program() asm.Instructions {
	const out = "out"
	// loadBytes copies n bytes at frame offset (register off) to the stack.
	loadBytes := func(off asm.Register, stack int32, n int32) asm.Instructions {
		return asm.Instructions{
			asm.Mov.Reg(asm.R1, asm.R6),
			asm.Mov.Reg(asm.R2, off),
			asm.Mov.Reg(asm.R3, asm.R10),
			asm.Add.Imm(asm.R3, stack),
			asm.Mov.Imm(asm.R4, n),
			asm.FnSkbLoadBytes.Call(),
			asm.JNE.Imm(asm.R0, 0, out),
		}
	}
	p := randomShare(b.Below, out)
	p = append(p, asm.Mov.Imm(asm.R7, 0))
	p = append(p, loadBytes(asm.R7, stFrame, 34)...)
	p = append(p,
		loadStack(asm.R1, stEthType, asm.Half),
		asm.JNE.Imm(asm.R1, ethPIPLE, out),
		loadStack(asm.R1, stVerIHL, asm.Byte),
		asm.Mov.Reg(asm.R2, asm.R1),
		asm.RSh.Imm(asm.R2, 4),
		asm.JNE.Imm(asm.R2, 4, out),
		asm.And.Imm(asm.R1, 0xf),
		asm.LSh.Imm(asm.R1, 2),
		asm.JLT.Imm(asm.R1, 20, out),
		asm.Mov.Reg(asm.R7, asm.R1),
		asm.Add.Imm(asm.R7, 14), // r7: L4 header offset
		loadStack(asm.R1, stFrag, asm.Half),
		asm.And.Imm(asm.R1, fragMaskLE),
		asm.JNE.Imm(asm.R1, 0, out),
		loadStack(asm.R8, stProto, asm.Byte), // r8: protocol
	)
	if b.Proto != 0 {
		p = append(p, asm.JNE.Imm(asm.R8, int32(b.Proto), out))
	} else {
		p = append(p,
			asm.JEq.Imm(asm.R8, 1, "proto_ok"),
			asm.JEq.Imm(asm.R8, 6, "proto_ok"),
			asm.JNE.Imm(asm.R8, 17, out),
			asm.Mov.Reg(asm.R8, asm.R8).WithSymbol("proto_ok"))
	}
	if b.Peer.Is4() {
		a := b.Peer.As4()
		p = append(p,
			loadStack(asm.R1, stSaddr, asm.Word),
			loadStack(asm.R2, stDaddr, asm.Word),
			asm.LoadImm(asm.R3, int64(binary.LittleEndian.Uint32(a[:])), asm.DWord),
			asm.JEq.Reg(asm.R1, asm.R3, "peer_ok"),
			asm.JNE.Reg(asm.R2, asm.R3, out),
			asm.Mov.Reg(asm.R3, asm.R3).WithSymbol("peer_ok"))
	}
	p = append(p,
		loadStack(asm.R9, stTotLen, asm.Byte),
		asm.LSh.Imm(asm.R9, 8),
		loadStack(asm.R1, stTotLen+1, asm.Byte),
		asm.Or.Reg(asm.R9, asm.R1),
		asm.Add.Imm(asm.R9, 14), // r9: end of the IP packet in the frame
	)
	p = append(p, loadBytes(asm.R7, stL4, 8)...)
	if b.Port != 0 { // ICMP has no ports: the filter excludes it
		p = append(p, asm.JEq.Imm(asm.R8, 1, out))
		port := int32(b.Port>>8 | b.Port<<8) // network order, little-endian load
		p = append(p,
			loadStack(asm.R1, stL4, asm.Half),
			loadStack(asm.R2, stL4+2, asm.Half),
			asm.JEq.Imm(asm.R1, port, "port_ok"),
			asm.JNE.Imm(asm.R2, port, out),
			asm.Mov.Reg(asm.R2, asm.R2).WithSymbol("port_ok"))
	}
	// r1: L4 header length (UDP and ICMP echo: 8).
	p = append(p,
		asm.Mov.Imm(asm.R1, 8),
		asm.JNE.Imm(asm.R8, 6, "hdr_done"),
		asm.Mov.Reg(asm.R2, asm.R7),
		asm.Add.Imm(asm.R2, 12))
	p = append(p, loadBytes(asm.R2, stDoff, 1)...)
	p = append(p,
		loadStack(asm.R1, stDoff, asm.Byte),
		asm.RSh.Imm(asm.R1, 4),
		asm.LSh.Imm(asm.R1, 2),
		asm.Add.Reg(asm.R1, asm.R7).WithSymbol("hdr_done"), // r1: payload offset (UDP path adds r7 to 8)
		asm.Add.Imm(asm.R1, int32(b.Skip&^1)),              // an even skip keeps the words aligned
		asm.StoreMem(asm.R10, stPayload, asm.R1, asm.DWord),
		asm.Sub.Reg(asm.R9, asm.R1), // r9: payload length
		asm.JSLT.Imm(asm.R9, 2, out),
		asm.RSh.Imm(asm.R9, 1), // r9: payload words
		asm.FnGetPrandomU32.Call(),
		asm.Mod.Reg(asm.R0, asm.R9),
		asm.LSh.Imm(asm.R0, 1),
		loadStack(asm.R1, stPayload, asm.DWord),
		asm.Add.Reg(asm.R0, asm.R1),
		asm.Mov.Reg(asm.R9, asm.R0), // r9: offset of the word
		asm.FnGetPrandomU32.Call(),
		asm.And.Imm(asm.R0, 15),
		asm.Mov.Imm(asm.R1, 1),
		asm.LSh.Reg(asm.R1, asm.R0),
		asm.StoreMem(asm.R10, stMask, asm.R1, asm.DWord),
	)
	p = append(p, loadBytes(asm.R9, stOld, 2)...)
	p = append(p,
		loadStack(asm.R1, stOld, asm.Half),
		loadStack(asm.R2, stMask, asm.DWord),
		asm.Xor.Reg(asm.R1, asm.R2),
		asm.StoreMem(asm.R10, stNew, asm.R1, asm.Half),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Reg(asm.R2, asm.R9),
		asm.Mov.Reg(asm.R3, asm.R10),
		asm.Add.Imm(asm.R3, stNew),
		asm.Mov.Imm(asm.R4, 2),
		asm.Mov.Imm(asm.R5, 0),
		asm.FnSkbStoreBytes.Call(),
		asm.JNE.Imm(asm.R0, 0, out),
		// bpf_l4_csum_replace(skb, checksum offset, old, new, size 2 | flags)
		asm.Mov.Reg(asm.R2, asm.R7),
		asm.Add.Imm(asm.R2, 16), // TCP's checksum
		asm.Mov.Imm(asm.R5, 2),
		asm.JEq.Imm(asm.R8, 6, "csum"),
		asm.Add.Imm(asm.R2, -14), // ICMP's
		asm.JEq.Imm(asm.R8, 1, "csum"),
		asm.Add.Imm(asm.R2, 4), // UDP's
		asm.Mov.Imm(asm.R5, 2|bpfFMarkMangled0),
		asm.Mov.Reg(asm.R1, asm.R6).WithSymbol("csum"),
		loadStack(asm.R3, stOld, asm.Half),
		loadStack(asm.R4, stNew, asm.Half),
		asm.FnL4CsumReplace.Call(),
		asm.Mov.Imm(asm.R0, 0).WithSymbol(out), // TC_ACT_OK
		asm.Return(),
	)
	return p
}
