//go:build linux

package injector

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/cilium/ebpf"
)

// ethFrame builds an Ethernet frame to dst of EtherType typ around payload.
func ethFrame(dst []byte, typ uint16, payload []byte) []byte {
	b := append(append([]byte(nil), dst...), 0x02, 0, 0, 0, 0, 0x02)
	b = binary.BigEndian.AppendUint16(b, typ)
	return append(b, payload...)
}

// ipv4 is an IPv4 header of ihl words (options zero) with protocol proto and the
// flags/fragment-offset field frag, then an L4 header with destination port dport.
func ipv4(ihl int, proto byte, frag uint16, dport uint16) []byte {
	h := make([]byte, 4*ihl+8)
	h[0] = 0x40 | byte(ihl)
	binary.BigEndian.PutUint16(h[2:], uint16(len(h)))
	binary.BigEndian.PutUint16(h[6:], frag)
	h[8], h[9] = 64, proto
	binary.BigEndian.PutUint16(h[4*ihl:], 40000)
	binary.BigEndian.PutUint16(h[4*ihl+2:], dport)
	return h
}

// ipv6 is an IPv6 header with next header next, then an L4 header to dport.
func ipv6(next byte, dport uint16) []byte {
	h := make([]byte, 48)
	h[0] = 0x60
	binary.BigEndian.PutUint16(h[4:], 8)
	h[6], h[7] = next, 64
	binary.BigEndian.PutUint16(h[40:], 40000)
	binary.BigEndian.PutUint16(h[42:], dport)
	return h
}

// TestLostOnWireMatch runs the outbound loss programs on crafted frames
// (BPF_PROG_TEST_RUN): the frames they take get the NIC's own MAC as their
// destination, every other frame passes untouched, and all continue (TC_ACT_OK).
// roce-drop takes what nftables' `meta l4proto udp th dport 4791` took.
func TestLostOnWireMatch(t *testing.T) {
	needRoot(t)
	own := []byte{0x02, 0xc1, 0x00, 0x00, 0x00, 0x01}
	peer := []byte{0x02, 0xc1, 0x00, 0x00, 0x00, 0x02}
	const udp, tcp = 17, 6
	for _, tc := range []struct {
		name  string
		roce  bool
		frame []byte
		lost  bool
	}{
		{"loss: IPv4 TCP", false, ethFrame(peer, 0x0800, ipv4(5, tcp, 0, 22)), true},
		{"loss: ARP", false, ethFrame(peer, 0x0806, make([]byte, 28)), true},
		{"roce: IPv4 UDP 4791", true, ethFrame(peer, 0x0800, ipv4(5, udp, 0, 4791)), true},
		{"roce: IPv4 with options", true, ethFrame(peer, 0x0800, ipv4(7, udp, 0, 4791)), true},
		{"roce: IPv4 first fragment", true, ethFrame(peer, 0x0800, ipv4(5, udp, 0x2000, 4791)), true},
		{"roce: IPv4 later fragment", true, ethFrame(peer, 0x0800, ipv4(5, udp, 0x2010, 4791)), false},
		{"roce: IPv4 UDP 4792", true, ethFrame(peer, 0x0800, ipv4(5, udp, 0, 4792)), false},
		{"roce: IPv4 TCP 4791", true, ethFrame(peer, 0x0800, ipv4(5, tcp, 0, 4791)), false},
		{"roce: IPv6 UDP 4791", true, ethFrame(peer, 0x86dd, ipv6(udp, 4791)), true},
		{"roce: IPv6 TCP 4791", true, ethFrame(peer, 0x86dd, ipv6(tcp, 4791)), false},
		{"roce: ARP", true, ethFrame(peer, 0x0806, make([]byte, 28)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := lostOnWire{Below: 1 << 32, RoCE: tc.roce}
			copy(w.MAC[:], own)
			prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, Instructions: w.program(), License: "Dual MIT/GPL"})
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			defer prog.Close()
			out := make([]byte, len(tc.frame))
			ret, err := prog.Run(&ebpf.RunOptions{Data: tc.frame, DataOut: out})
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if ret != 0 {
				t.Errorf("returned %d, want TC_ACT_OK (0)", ret)
			}
			want := append([]byte(nil), tc.frame...)
			if tc.lost {
				copy(want, own)
			}
			if !bytes.Equal(out, want) {
				t.Errorf("frame after the program:\n% x\nwant\n% x", out, want)
			}
		})
	}
}
