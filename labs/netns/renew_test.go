//go:build linux

package netns

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestRenew: a renewed sandbox outlives its old TTL, also for sweeps from another
// data directory (which read its slot lease); renewing can shorten it, and a
// sandbox that is down cannot be renewed.
func TestRenew(t *testing.T) {
	needRoot(t)
	data := t.TempDir()
	s := upSandbox(t, "2x1", Options{DataDir: data, TTL: time.Second})
	for _, bad := range []time.Duration{0, -time.Second, MaxTTL + time.Hour} {
		if _, err := s.Renew(bad); err == nil {
			t.Errorf("Renew(%s) succeeded", bad)
		}
	}
	exp, err := s.Renew(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	st := mustState(t, data, s.ID())
	if !st.Expires.Equal(exp) {
		t.Errorf("state file expires %s, want %s", st.Expires, exp)
	}
	if l := readSlots()[st.Index]; l.ID != s.ID() || !l.Expires.Equal(exp) {
		t.Errorf("slot lease %+v, want expiry %s", l, exp)
	}
	time.Sleep(1300 * time.Millisecond)
	select {
	case <-s.Done():
		t.Fatal("the sandbox was torn down at its old TTL")
	default:
	}
	for _, dir := range []string{data, t.TempDir()} {
		if got := sweepOnly(t, dir, s.ID()); len(got) != 0 {
			t.Errorf("sweep (data %s) removed the renewed sandbox", dir)
		}
	}
	if out := run(t, s, "node1", "hostname"); strings.TrimSpace(out) != "node1" {
		t.Errorf("renewed sandbox broken: %q", out)
	}

	if _, err := s.Renew(300 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the sandbox outlived its shortened TTL")
	}
	if left := leftovers(s.ID(), data); len(left) > 0 {
		t.Errorf("teardown after the shortened TTL left:\n%s", strings.Join(left, "\n"))
	}
	if _, err := s.Renew(time.Hour); !errors.Is(err, ErrNoSandbox) {
		t.Errorf("Renew after the teardown: %v, want ErrNoSandbox", err)
	}
}
