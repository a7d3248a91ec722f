//go:build linux

package ncclsock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/netip"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/commlab/commlab/bench/ncclmsg"
	"github.com/vishvananda/netns"

	"github.com/commlab/commlab/internal/testenv"
)

func ip(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// pair builds namespaces cl-tc<id>-n1 and -n2 joined by a veth named rdma0
// (198.18.1.1 and .2) and returns their names.
func pair(t *testing.T) (string, string) {
	testenv.RequireRoot(t, "network namespaces")
	var b [3]byte
	rand.Read(b[:])
	n1, n2 := "cl-tc"+hex.EncodeToString(b[:])+"-n1", "cl-tc"+hex.EncodeToString(b[:])+"-n2"
	t.Cleanup(func() {
		exec.Command("ip", "netns", "del", n1).Run()
		exec.Command("ip", "netns", "del", n2).Run()
	})
	ip(t, "netns", "add", n1)
	ip(t, "netns", "add", n2)
	ip(t, "-n", n1, "link", "add", "rdma0", "type", "veth", "peer", "name", "rdma0", "netns", n2)
	for i, ns := range []string{n1, n2} {
		// lo carries the ICMP host-unreachable the kernel sends itself when ARP fails.
		ip(t, "-n", ns, "link", "set", "lo", "up")
		ip(t, "-n", ns, "addr", "add", "198.18.1."+string(rune('1'+i))+"/24", "dev", "rdma0")
		ip(t, "-n", ns, "link", "set", "rdma0", "up")
	}
	return n1, n2
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
	n1, n2 := pair(t)
	to := netip.MustParseAddrPort("198.18.1.2:5555")
	rel := func(s string) ncclmsg.Release { r, _ := ncclmsg.ParseRelease(s); return r }

	ip(t, "-n", n2, "link", "set", "rdma0", "down") // n1's rdma0: NO-CARRIER, route kept
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

	ip(t, "-n", n2, "link", "set", "rdma0", "up")
	ip(t, "-n", n1, "link", "set", "rdma0", "down") // route removed
	for _, r := range []string{"2.24", "2.28"} {
		took, err := dialIn(t, n1, Dialer{Release: rel(r)}, to)
		var e *Error
		if !errors.As(err, &e) || e.Code != SystemError || e.Errno != syscall.ENETUNREACH || took > time.Second {
			t.Errorf("%s, admin down: %v after %s, want code 2 at once", r, err, took)
		}
		t.Logf("%s, admin down: %v after %s", r, err, took.Round(time.Millisecond))
	}
}
