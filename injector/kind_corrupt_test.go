//go:build linux

package injector

import (
	"bytes"
	"errors"
	"io"
	"math/bits"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestCorruptValidate(t *testing.T) {
	reg, err := NewRegistry(Builtin()...)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		params map[string]string
		want   string // "" when valid
	}{
		{map[string]string{"nic": "rdma0", "percent": "1%"}, ""},
		{map[string]string{"nic": "rdma0", "percent": "0.5%", "proto": "udp", "port": "4791", "peer": "10.0.0.2", "direction": "both"}, ""},
		{map[string]string{"nic": "rdma0", "percent": "1%", "via": "netem", "direction": "out"}, ""},
		{map[string]string{"nic": "rdma0", "percent": "0%"}, "percent"},
		{map[string]string{"nic": "rdma0", "percent": "1%", "proto": "sctp"}, "proto"},
		{map[string]string{"nic": "rdma0", "percent": "1%", "port": "70000"}, "port"},
		{map[string]string{"nic": "rdma0", "percent": "1%", "peer": "fd00::1"}, "IPv4"},
		{map[string]string{"nic": "rdma0", "percent": "1%", "peer": "10.0.0.300"}, "peer"},
		{map[string]string{"nic": "rdma0", "percent": "1%", "via": "netem"}, "direction=out"},
		{map[string]string{"nic": "rdma0", "percent": "1%", "via": "netem", "direction": "out", "port": "4791"}, "no proto, port, peer or skip"},
		{map[string]string{"nic": "rdma0", "percent": "1%", "via": "xdp"}, "via"},
		{map[string]string{"nic": "rdma0", "percent": "1%", "skip": "23"}, "even"},
		{map[string]string{"nic": "rdma0", "percent": "1%", "proto": "icmp", "port": "7"}, "ICMP has no ports"},
	} {
		_, err := reg.Parse("corrupt", tc.params)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.params, err)
		case tc.want != "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: %v, want ErrInvalid naming %q", tc.params, err, tc.want)
		}
	}
}

// udpDamage sends n datagrams of a fixed pattern from node from to to's rdma0
// address on port and returns how many arrived and how many arrived damaged;
// a damaged one must differ from what was sent by exactly one bit.
func (l *testLab) udpDamage(t *testing.T, from, to string, port, n int) (arrived, damaged int) {
	t.Helper()
	arrived, damaged, _ = l.udpDamageAt(t, from, to, port, n)
	return arrived, damaged
}

// udpDamageAt is udpDamage that also returns the lowest damaged byte offset.
func (l *testLab) udpDamageAt(t *testing.T, from, to string, port, n int) (arrived, damaged, first int) {
	t.Helper()
	first = 1 << 30
	var rx, tx *net.UDPConn
	if err := l.inNS(to, func() (err error) {
		rx, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(l.Addr(to, "rdma0")), Port: port})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	rx.SetReadBuffer(4 << 20)
	if err := l.inNS(from, func() (err error) {
		tx, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.ParseIP(l.Addr(to, "rdma0")), Port: port})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	msg := bytes.Repeat([]byte{0x5a, 0xc3}, 128)
	buf := make([]byte, 2048)
	for range n {
		if _, err := tx.Write(msg); err != nil {
			t.Fatal(err)
		}
		rx.SetReadDeadline(time.Now().Add(2 * time.Second))
		k, err := rx.Read(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		arrived++
		if d := bitDiff(msg, buf[:k]); d == 1 {
			damaged++
			for i := range msg {
				if msg[i] != buf[i] {
					first = min(first, i)
				}
			}
		} else if d != 0 {
			t.Fatalf("datagram differs by %d bits, want 0 or 1", d)
		}
	}
	return arrived, damaged, first
}

// bitDiff counts the bits in which a and b differ (a length change counts as many).
func bitDiff(a, b []byte) int {
	if len(a) != len(b) {
		return 1 << 20
	}
	n := 0
	for i := range a {
		n += bits.OnesCount8(a[i] ^ b[i])
	}
	return n
}

// tcpDamage streams size bytes over TCP from node from to to's rdma0 address
// and returns the number of bits that arrived flipped; the stream must arrive
// whole, as the checksums were fixed and nothing was dropped.
func (l *testLab) tcpDamage(t *testing.T, from, to string, port, size int) int {
	t.Helper()
	var ln net.Listener
	addr := net.JoinHostPort(l.Addr(to, "rdma0"), strconv.Itoa(port))
	if err := l.inNS(to, func() (err error) { ln, err = net.Listen("tcp4", addr); return err }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(60 * time.Second))
		b, _ := io.ReadAll(c)
		got <- b
	}()
	var c net.Conn
	if err := l.inNS(from, func() (err error) { c, err = net.DialTimeout("tcp4", addr, 5*time.Second); return err }); err != nil {
		t.Fatal(err)
	}
	sent := make([]byte, size)
	for i := range sent {
		sent[i] = byte(i % 251)
	}
	if _, err := c.Write(sent); err != nil {
		t.Fatal(err)
	}
	c.Close()
	b := <-got
	if len(b) != size {
		t.Fatalf("TCP stream: %d of %d bytes arrived", len(b), size)
	}
	return bitDiff(sent, b)
}

// TestCorruptRoundTrip: the tc BPF program damages exactly the packets it is
// asked to, the damage reaches the application (checksums fixed, nothing
// dropped), and revert leaves the node as it was.
func TestCorruptRoundTrip(t *testing.T) {
	l := newLab(t, 1500, "n1", "n2")
	in := newInjector(t)
	if err := TCBPF(); err != nil {
		t.Skipf("no tc BPF here: %v", err)
	}
	filters := func(t *testing.T, node string) string {
		return l.Run(t, node, "tc", "filter", "show", "dev", "rdma0", "ingress") + l.Run(t, node, "tc", "filter", "show", "dev", "rdma0", "egress")
	}
	cases := []struct {
		name   string
		node   string
		params map[string]string
		check  func(t *testing.T)
	}{
		{"udp port in", "n2", map[string]string{"nic": "rdma0", "percent": "100%", "proto": "udp", "port": "5501"}, func(t *testing.T) {
			if a, d := l.udpDamage(t, "n1", "n2", 5501, 200); a < 190 || d != a {
				t.Errorf("UDP to the chosen port: %d of 200 arrived, %d damaged; want all arrived and damaged", a, d)
			}
			if a, d := l.udpDamage(t, "n1", "n2", 5502, 200); a < 190 || d != 0 {
				t.Errorf("UDP to another port: %d of 200 arrived, %d damaged; want all arrived, none damaged", a, d)
			}
		}},
		// With all but the last word skipped, the flip lands in bytes 254-255.
		{"skip", "n2", map[string]string{"nic": "rdma0", "percent": "100%", "proto": "udp", "skip": "254"}, func(t *testing.T) {
			a, d, first := l.udpDamageAt(t, "n1", "n2", 5508, 100)
			if a < 95 || d != a || first < 254 {
				t.Errorf("UDP with skip 254: %d of 100 arrived, %d damaged, first damaged byte %d; want all damaged at 254 or later", a, d, first)
			}
		}},
		{"udp share out", "n1", map[string]string{"nic": "rdma0", "percent": "30%", "proto": "udp", "direction": "out"}, func(t *testing.T) {
			a, d := l.udpDamage(t, "n1", "n2", 5503, 1000)
			t.Logf("30%%: %d of 1000 arrived, %d damaged", a, d)
			if a < 990 || d < 200 || d > 400 {
				t.Errorf("UDP with 30%%: %d of 1000 arrived, %d damaged; want all arrived, 200-400 damaged", a, d)
			}
		}},
		{"peer filter", "n2", map[string]string{"nic": "rdma0", "percent": "100%", "peer": "192.0.2.9"}, func(t *testing.T) {
			if a, d := l.udpDamage(t, "n1", "n2", 5504, 200); a < 190 || d != 0 {
				t.Errorf("UDP from another peer: %d of 200 arrived, %d damaged; want none damaged", a, d)
			}
		}},
		{"peer match", "n2", map[string]string{"nic": "rdma0", "percent": "100%", "peer": "PEER"}, func(t *testing.T) {
			if a, d := l.udpDamage(t, "n1", "n2", 5506, 200); a < 190 || d != a {
				t.Errorf("UDP from the chosen peer: %d of 200 arrived, %d damaged; want all damaged", a, d)
			}
		}},
		// iputils ping checks the data its echo replies bring back.
		{"icmp ping", "n2", map[string]string{"nic": "rdma0", "percent": "100%", "proto": "icmp"}, func(t *testing.T) {
			out, _ := l.Try("n1", "ping", "-c", "5", "-i", "0.05", "-s", "1000", "-W", "1", l.Addr("n2", "rdma0"))
			mustContain(t, "ping", out, "wrong data byte #", " 5 received")
			if n := l.udpCount(t, "n1", "n2", 5507, 100); n < 95 {
				t.Errorf("UDP with proto=icmp: %d of 100 arrived", n)
			}
		}},
		{"tcp both", "n2", map[string]string{"nic": "rdma0", "percent": "20%", "proto": "tcp", "direction": "both"}, func(t *testing.T) {
			n := l.tcpDamage(t, "n1", "n2", 5505, 8<<20)
			t.Logf("TCP 8 MiB through 20%%: %d bits flipped", n)
			if n == 0 {
				t.Errorf("TCP 8 MiB through 20%% corruption: no bit flipped")
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.params["peer"] == "PEER" {
				tc.params["peer"] = l.Addr("n1", "rdma0")
			}
			f := mustParse(t, in, "corrupt", tc.params)
			before := filters(t, tc.node)
			roundTrip(t, l, in, tc.node, f, func(t *testing.T, e Entry) {
				out := filters(t, tc.node)
				t.Logf("tc filter show:\n%s", out)
				mustContain(t, "tc filter show", out, "bpf", "name "+tcProgName, "direct-action")
				if strings.Contains(strings.ToLower(out), "corrupt") {
					t.Errorf("tc filter show names the fault:\n%s", out)
				}
				tc.check(t)
			})
			assertSame(t, "tc filters after revert", before, filters(t, tc.node))
		})
	}
}
