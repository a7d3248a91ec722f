//go:build linux

package netns

import (
	"bufio"
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/internal/hostns"
	"github.com/commlab/commlab/internal/testlab"
	"github.com/commlab/commlab/labs/cgroup"
)

// startHelper runs this test binary as a child that brings sandbox id up.
func startHelper(t *testing.T, id, data string, env ...string) (*exec.Cmd, <-chan struct{}) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=up", "HELPER_TOPO=4x2", "HELPER_ID="+id, "HELPER_DATA="+data)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	up := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "UP" {
				close(up)
			}
		}
	}()
	return cmd, up
}

func sweepOnly(t *testing.T, data string, ids ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	removed, err := SweepWith(ctx, data, SweepOptions{Match: func(id string) bool { return slices.Contains(ids, id) }, UnrecordedGrace: -1})
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	return removed
}

// TestCrashDuringUp kills a process with SIGKILL at random points of Up (and
// once after it) and checks that Sweep then leaves nothing.
func TestCrashDuringUp(t *testing.T) {
	needRoot(t)
	data := t.TempDir()

	// Calibrate: how long from exec to "up" for a 4-node sandbox.
	id := testlab.NewID()
	t0 := time.Now()
	cmd, up := startHelper(t, id, data)
	select {
	case <-up:
	case <-time.After(30 * time.Second):
		t.Fatal("helper did not come up")
	}
	full := time.Since(t0)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if got := sweepOnly(t, data, id); !slices.Equal(got, []string{id}) {
		t.Errorf("sweep after a kill -9 of a finished Up removed %v, want [%s]", got, id)
	}
	if left := leftovers(id, data); len(left) > 0 {
		t.Fatalf("sweep left:\n%s", strings.Join(left, "\n"))
	}
	t.Logf("exec to up: %v", full)

	const runs = 20
	var before, partial, after int
	for i := 0; i < runs; i++ {
		id := testlab.NewID()
		delay := time.Duration(rand.Int64N(int64(full + full/5)))
		cmd, up := startHelper(t, id, data)
		time.Sleep(delay)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		select {
		case <-up:
			after++
		default:
			if len(leftovers(id, data)) > 0 {
				partial++
			} else {
				before++
			}
		}
		sweepOnly(t, data, id)
		if left := leftovers(id, data); len(left) > 0 {
			t.Fatalf("run %d (killed after %v): sweep left:\n%s", i, delay, strings.Join(left, "\n"))
		}
	}
	t.Logf("%d kills: %d before Up created anything, %d mid-Up, %d after Up", runs, before, partial, after)
	if partial == 0 {
		t.Errorf("no kill landed in the middle of Up; the test did not exercise a partial sandbox")
	}
}

// TestSweepKeepsLive checks what Sweep must keep: a sandbox whose owner lives
// (even when swept with another data directory) and a detached one before
// its TTL; and what it must remove: a detached one after its TTL, and objects
// with no record at all.
func TestSweepKeepsLive(t *testing.T) {
	needRoot(t)
	data := t.TempDir()
	live := upSandbox(t, "2x1", Options{DataDir: data})
	if got := sweepOnly(t, data, live.ID()); len(got) != 0 {
		t.Errorf("sweep removed the live sandbox: %v", got)
	}
	if got := sweepOnly(t, t.TempDir(), live.ID()); len(got) != 0 {
		t.Errorf("sweep with another data dir removed the live sandbox: %v", got)
	}
	if out := run(t, live, "node1", "hostname"); strings.TrimSpace(out) != "node1" {
		t.Errorf("live sandbox broken after sweeps: %q", out)
	}

	// Detached, owner process gone, TTL 2s.
	det := testlab.NewID()
	cmd, up := startHelper(t, det, data, "HELPER_DETACH=1", "HELPER_EXIT=1", "HELPER_TTL=2s")
	select {
	case <-up:
	case <-time.After(30 * time.Second):
		t.Fatal("helper did not come up")
	}
	_ = cmd.Wait()
	t.Cleanup(func() { sweepOnly(t, data, det) })
	if got := sweepOnly(t, data, det); len(got) != 0 {
		t.Errorf("sweep removed a detached sandbox before its TTL: %v", got)
	}
	if st, err := ReadState(data, det); err != nil || st.Owner.PID != 0 {
		t.Errorf("detached state = %+v, %v", st, err)
	}
	time.Sleep(time.Until(mustState(t, data, det).Expires) + 100*time.Millisecond)
	if got := sweepOnly(t, data, det); !slices.Equal(got, []string{det}) {
		t.Errorf("sweep after TTL removed %v, want [%s]", got, det)
	}
	if left := leftovers(det, data); len(left) > 0 {
		t.Errorf("sweep after TTL left:\n%s", strings.Join(left, "\n"))
	}

	// Objects with no record at all: a namespace and a cgroup.
	orphan := testlab.NewID()
	h, ns, err := hostns.Create(FabricNetNSName(orphan))
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	ns.Close()
	if _, err := cgroup.New(CgroupPath(orphan)+"/node1", cgroup.Limits{}); err != nil {
		t.Fatal(err)
	}
	// Young unrecorded objects may be someone else's work in progress: kept by default.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if got, err := SweepWith(ctx, data, SweepOptions{Match: func(id string) bool { return id == orphan }}); err != nil || len(got) != 0 {
		t.Errorf("sweep within the grace period removed %v (%v)", got, err)
	}
	if got := sweepOnly(t, data, orphan); !slices.Equal(got, []string{orphan}) {
		t.Errorf("sweep of unrecorded objects removed %v, want [%s]", got, orphan)
	}
	if left := leftovers(orphan, data); len(left) > 0 {
		t.Errorf("sweep of unrecorded objects left:\n%s", strings.Join(left, "\n"))
	}
}

func mustState(t *testing.T, data, id string) *State {
	t.Helper()
	st, err := ReadState(data, id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
