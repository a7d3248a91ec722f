package injector

import "github.com/cilium/ebpf/asm"

// Pieces the tc programs (bitFlip, lostOnWire) share.

// randomShare is a program's prologue: it keeps the packet (skb) in r6 and, unless
// below is 1<<32 (every packet), jumps to skip when a bpf_get_prandom_u32 draw is
// not below it.
func randomShare(below uint64, skip string) asm.Instructions {
	p := asm.Instructions{asm.Mov.Reg(asm.R6, asm.R1)}
	if below < 1<<32 {
		p = append(p,
			asm.FnGetPrandomU32.Call(),
			asm.LoadImm(asm.R1, int64(below), asm.DWord),
			asm.JGE.Reg(asm.R0, asm.R1, skip))
	}
	return p
}

// loadStack loads size bytes at r10+off into dst.
func loadStack(dst asm.Register, off int16, size asm.Size) asm.Instruction {
	return asm.LoadMem(dst, asm.R10, off, size)
}
