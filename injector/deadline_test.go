//go:build linux

package injector

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestDeadlineServerStopped: a fault's deadline passes while no process watches;
// the next start (a fresh injector on the same data dir) reverts it, and a start
// that only reverts expired faults leaves a live one alone.
func TestDeadlineServerStopped(t *testing.T) {
	l := newLab(t, 1500, "n1")
	data := t.TempDir()
	base := l.snapshot(t, "n1")
	first := openAt(t, data)
	ctx := ctxT(t)
	short, err := first.Apply(ctx, l.target("n1"), mustParse(t, first, "nic-rate", map[string]string{"nic": "rdma0", "rate": "10mbit"}), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	long, err := first.Apply(ctx, l.target("n1"), mustParse(t, first, "loss", map[string]string{"nic": "eth0", "percent": "1%"}), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond)
	mustContain(t, "tc qdisc show (nobody watching)", l.Run(t, "n1", "tc", "qdisc", "show", "dev", "rdma0"), "tbf c2:")

	next := openAt(t, data)
	done, err := next.RevertExpired(ctx)
	if err != nil || len(done) != 1 || done[0] != short.ID {
		t.Fatalf("revert expired at start: %v %v, want [%s]", done, err, short.ID)
	}
	if out := l.Run(t, "n1", "tc", "qdisc", "show", "dev", "rdma0"); strings.Contains(out, "c2:") || !strings.Contains(out, "tbf c1:") {
		t.Errorf("expired fault still there: %s", out)
	}
	mustContain(t, "nft list ruleset", l.Run(t, "n1", "nft", "list", "ruleset"), "numgen random mod 10000 < 100")
	done, err = next.Sweep(ctx)
	if err != nil || len(done) != 1 || done[0] != long.ID {
		t.Fatalf("sweep: %v %v, want [%s]", done, err, long.ID)
	}
	assertSame(t, "after sweep", base, l.snapshot(t, "n1"))
}

// TestWatchdog: a watching injector reverts a fault when its deadline passes,
// also one applied by another injector sharing the journal (the CLI).
func TestWatchdog(t *testing.T) {
	l := newLab(t, 1500, "n1")
	data := t.TempDir()
	server, cli := openAt(t, data), openAt(t, data)
	ctx, cancel := context.WithCancel(ctxT(t))
	stopped := make(chan struct{})
	go func() { server.Watch(ctx, 50*time.Millisecond); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	e, err := cli.Apply(ctx, l.target("n1"), mustParse(t, cli, "port-block", map[string]string{"ports": "29500"}), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	for {
		list, _ := cli.List()
		if len(list) == 0 {
			break
		}
		if time.Since(t0) > 3*time.Second {
			t.Fatalf("fault %s still journaled 2s after its deadline", e.ID)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if late := time.Until(e.Deadline); late > 0 {
		t.Errorf("reverted %s before the deadline", late)
	}
	if out := l.Run(t, "n1", "nft", "list", "ruleset"); out != "" {
		t.Errorf("rules left after the watchdog's revert:\n%s", out)
	}
}

// TestConflict: a second fault on what an active fault owns is refused before
// anything is journaled; after the revert it is accepted.
func TestConflict(t *testing.T) {
	l := newLab(t, 1500, "n1")
	in := newInjector(t)
	ctx := ctxT(t)
	f := mustParse(t, in, "nic-rate", map[string]string{"nic": "rdma0", "rate": "10mbit"})
	e, err := in.Apply(ctx, l.target("n1"), f, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	g := mustParse(t, in, "nic-rate", map[string]string{"nic": "rdma0", "rate": "20mbit"})
	if _, err := in.Apply(ctx, l.target("n1"), g, time.Minute); !errors.Is(err, ErrConflict) {
		t.Fatalf("second nic-rate on rdma0: %v, want a conflict", err)
	}
	mustContain(t, "tc qdisc", l.Run(t, "n1", "tc", "qdisc", "show", "dev", "rdma0"), "rate 10Mbit")
	if list, _ := in.List(); len(list) != 1 {
		t.Errorf("journal: %v", list)
	}
	if err := in.Revert(ctx, e.ID); err != nil {
		t.Fatal(err)
	}
	e2, err := in.Apply(ctx, l.target("n1"), g, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Revert(ctx, e2.ID); err != nil {
		t.Fatal(err)
	}
	// Claims conflict even where the host shows nothing yet (env-force's file).
	ef := mustParse(t, in, "env-force", map[string]string{"vars": "A=1"})
	e3, err := in.Apply(ctx, l.target("n1"), ef, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Apply(ctx, l.target("n1"), ef, time.Minute); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "already holds file:profile.d/nccl.sh") {
		t.Fatalf("second env-force on the same file: %v", err)
	}
	if err := in.Revert(ctx, e3.ID); err != nil {
		t.Fatal(err)
	}
	// A root qdisc commlab could not put back is never replaced.
	l.Run(t, "n1", "tc", "qdisc", "replace", "dev", "rdma0", "root", "handle", "1:", "htb")
	if _, err := in.Apply(ctx, l.target("n1"), g, time.Minute); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "cannot put back") {
		t.Fatalf("nic-rate over an htb root qdisc: %v", err)
	}
	mustContain(t, "tc qdisc", l.Run(t, "n1", "tc", "qdisc", "show", "dev", "rdma0"), "qdisc htb 1: root")
}
