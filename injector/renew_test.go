//go:build linux

package injector

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRenew: a renewed deadline holds for every process sharing the journal (a
// fresh injector, as after a crash, keeps the fault past its old deadline and
// reverts it at the new one), a renew killed before its record is whole leaves the
// old deadline, and what cannot be renewed is refused with nothing changed.
func TestRenew(t *testing.T) {
	l := newLab(t, 1500, "n1")
	data := t.TempDir()
	base := l.snapshot(t, "n1")
	in := openAt(t, data)
	ctx := ctxT(t)
	rate, err := in.Apply(ctx, l.target("n1"), mustParse(t, in, "nic-rate", map[string]string{"nic": "rdma0", "rate": "10mbit"}), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	loss, err := in.Apply(ctx, l.target("n1"), mustParse(t, in, "loss", map[string]string{"nic": "eth0", "percent": "1%"}), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	flap, err := in.Apply(ctx, l.target("n1"), mustParse(t, in, "nic-flap", map[string]string{"nic": "rdma0", "period": "20s", "duty": "10%"}), time.Minute)
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		id   string
		ttl  time.Duration
		want error
	}{
		{"unknown id", "f00000000", time.Hour, ErrNotFound},
		{"ttl too long", rate.ID, MaxTTL + time.Hour, ErrInvalid},
		{"helper stops at its deadline", flap.ID, time.Hour, ErrFixedDeadline},
	} {
		if _, err := in.Renew(tc.id, tc.ttl); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	renewed, err := in.Renew(rate.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if d := renewed.Deadline.Sub(rate.Deadline); d < 59*time.Minute {
		t.Errorf("renewed deadline only %s later", d)
	}
	// The loss fault's renew is killed mid-write: a torn record, as a kill leaves.
	f, err := os.OpenFile(filepath.Join(data, "injector", "journal"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"op":"renewed","id":"` + loss.ID + `","deadline":"2099-01-0`); err != nil {
		t.Fatal(err)
	}
	f.Close()

	time.Sleep(1200 * time.Millisecond)
	after := openAt(t, data) // a fresh process on the same journal
	done, err := after.RevertExpired(ctx)
	if err != nil || len(done) != 1 || done[0] != loss.ID {
		t.Fatalf("revert expired: %v %v, want only the torn renew's %s", done, err, loss.ID)
	}
	if out := l.Run(t, "n1", "nft", "list", "ruleset"); strings.Contains(out, "numgen") {
		t.Errorf("the loss fault outlived its old deadline:\n%s", out)
	}
	mustContain(t, "tc qdisc show (renewed)", l.Run(t, "n1", "tc", "qdisc", "show", "dev", "rdma0"), "tbf c2:")
	list, err := after.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list {
		if e.ID == rate.ID && !e.Deadline.Equal(renewed.Deadline) {
			t.Errorf("a fresh process reads deadline %s, want %s", e.Deadline, renewed.Deadline)
		}
	}
	// Renewing can shorten too; an expired fault is not renewed.
	if _, err := after.Renew(rate.ID, time.Second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond)
	if _, err := after.Renew(rate.ID, time.Hour); !errors.Is(err, ErrNotFound) {
		t.Errorf("renew past the deadline: %v", err)
	}
	if done, err := after.RevertExpired(ctx); err != nil || len(done) != 1 || done[0] != rate.ID {
		t.Fatalf("revert the shortened fault: %v %v", done, err)
	}
	if err := after.Revert(ctx, flap.ID); err != nil {
		t.Fatal(err)
	}
	assertSame(t, "after the reverts", base, l.snapshot(t, "n1"))
}
