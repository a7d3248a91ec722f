//go:build linux

package ncclsock

import (
	"context"
	"errors"
	"net/netip"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/commlab/commlab/bench/ncclmsg"
	"github.com/commlab/commlab/internal/testlab"
)

// pair builds two lab nodes n1 and n2 joined by a veth named rdma0
// (198.18.1.10 and .11).
func pair(t *testing.T) *testlab.Lab {
	// lo (up in every lab node) carries the ICMP host-unreachable the kernel
	// sends itself when ARP fails.
	return testlab.New(t, testlab.Spec{Nodes: []string{"n1", "n2"}, NICs: []testlab.NIC{{Name: "rdma0", Net: 1}}})
}

// dialIn dials from namespace ns.
func dialIn(t *testing.T, ns string, d Dialer, to netip.AddrPort) (time.Duration, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := netns.Set(h); err != nil {
		t.Fatal(err)
	}
	defer netns.Set(orig)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t0 := time.Now()
	c, err := d.Dial(ctx, to)
	if c != nil {
		c.Close()
	}
	return time.Since(t0), err
}

// TestLinkFailuresByRelease: the peer's NIC without carrier (its far end down)
// gives EHOSTUNREACH after ARP fails, which 2.24-2.26 turn into system error 2 at
// once and 2.27+ retry into remote error 6; a NIC set down administratively
// loses its route, and ENETUNREACH is 2 at once in every release.
func TestLinkFailuresByRelease(t *testing.T) {
	l := pair(t)
	n1 := l.NetNS("n1")
	to := netip.AddrPortFrom(netip.MustParseAddr(l.Addr("n2", "rdma0")), 5555)
	rel := func(s string) ncclmsg.Release { r, _ := ncclmsg.ParseRelease(s); return r }

	l.Run(t, "n2", "ip", "link", "set", "rdma0", "down") // n1's rdma0: NO-CARRIER, route kept
	for _, tc := range []struct {
		rel  string
		code int
		warn string
	}{
		{"2.26", SystemError, "socketPollConnect poll() returned 1, no POLLOUT events"},
		{"2.28", RemoteError, "returned No route to host, exceeded error retry count after 2 attempts"},
	} {
		took, err := dialIn(t, n1, Dialer{Release: rel(tc.rel), RetryCnt: 1, Sleep: time.Millisecond}, to)
		var e *Error
		if !errors.As(err, &e) || e.Code != tc.code || e.Errno != syscall.EHOSTUNREACH || !strings.Contains(e.Msg, tc.warn) {
			t.Errorf("%s, no carrier: %v (after %s), want code %d with %q", tc.rel, err, took, tc.code, tc.warn)
		}
		t.Logf("%s, no carrier: %v after %s", tc.rel, err, took.Round(time.Millisecond))
	}

	l.Run(t, "n2", "ip", "link", "set", "rdma0", "up")
	l.Run(t, "n1", "ip", "link", "set", "rdma0", "down") // route removed
	for _, r := range []string{"2.24", "2.28"} {
		took, err := dialIn(t, n1, Dialer{Release: rel(r)}, to)
		var e *Error
		if !errors.As(err, &e) || e.Code != SystemError || e.Errno != syscall.ENETUNREACH || took > time.Second {
			t.Errorf("%s, admin down: %v after %s, want code 2 at once", r, err, took)
		}
		t.Logf("%s, admin down: %v after %s", r, err, took.Round(time.Millisecond))
	}
}
