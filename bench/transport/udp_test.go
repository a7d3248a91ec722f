//go:build linux

package transport

import (
	"context"
	"net/netip"
	"testing"
)

// TestEphemeralPortsNotShared: the RoCE emulation's sockets on port 0 get ports of
// their own, while those on the RoCE port share it. With SO_REUSEPORT on every socket,
// 20 of 1000 binds to port 0 returned a port already held, and a queue pair then took
// another's datagrams (bench's TestCollectivesOverEachTransport/ib hung in CI).
func TestEphemeralPortsNotShared(t *testing.T) {
	ctx := context.Background()
	lo := netip.MustParseAddr("127.0.0.1")
	peer := netip.AddrPortFrom(lo, 9) // a connected UDP socket sends nothing by itself
	seen := map[uint16]bool{}
	for range 1000 {
		c, err := udpDial(ctx, netip.AddrPortFrom(lo, 0), peer)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		p := localPort(c)
		if seen[p] {
			t.Fatalf("port %d handed out twice among %d sockets on port 0", p, len(seen)+1)
		}
		seen[p] = true
	}
	const roce = 24791 + 7
	for i := range 2 {
		c, err := udpDial(ctx, netip.AddrPortFrom(lo, roce), netip.AddrPortFrom(lo, uint16(40000+i)))
		if err != nil {
			t.Fatalf("socket %d on the shared RoCE port: %v", i+1, err)
		}
		t.Cleanup(func() { c.Close() })
	}
}
