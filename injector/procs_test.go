//go:build linux

package injector

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSpawnGate: a process a fault starts runs only once released; if the
// starter dies first (the gate closes unreleased), it exits without running.
func TestSpawnGate(t *testing.T) {
	exe, _ := os.Executable()
	helper := []string{exe, helperArg}
	id := "f" + randHex(4)
	p, release, err := spawn(helper, id, []string{"sleep", "30"})
	if err != nil {
		t.Fatal(err)
	}
	release(false)
	waitDead(t, p, 5*time.Second)
	if got := tagged(id); len(got) != 0 {
		t.Fatalf("unreleased process ran: %v", got)
	}

	p, release, err = spawn(helper, id, []string{"sleep", "30"})
	if err != nil {
		t.Fatal(err)
	}
	if err := release(true); err != nil {
		t.Fatal(err)
	}
	// The kernel renames the process (comm) before it lays out the new
	// environment, so wait for both: environ reads empty in between.
	var env []byte
	deadline := time.Now().Add(5 * time.Second)
	for {
		comm, _ := os.ReadFile("/proc/" + itoa(p.PID) + "/comm")
		env, _ = os.ReadFile("/proc/" + itoa(p.PID) + "/environ")
		if strings.TrimSpace(string(comm)) == "sleep" && len(env) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("released process is %q (environment %d bytes), not sleep", comm, len(env))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !strings.Contains(string(env), tagEnv+"="+id) || strings.Contains(string(env), helperEnv+"=") {
		t.Errorf("released process's environment: want the fault tag and no helper marker")
	}
	if err := stopProcs(ctxT(t), id, bootID(), []Proc{p}, 9, 0); err != nil {
		t.Fatal(err)
	}
	if got := tagged(id); len(got) != 0 {
		t.Fatalf("still running after stopProcs: %v", got)
	}
}

func waitDead(t *testing.T, p Proc, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for p.alive() {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still alive", p.PID)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
