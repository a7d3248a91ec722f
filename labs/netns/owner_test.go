//go:build linux

package netns

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestZombieOwnerIsDead: a killed owner that nobody has reaped yet (state Z)
// keeps its pid and start time, but will never tear its sandbox down.
func TestZombieOwnerIsDead(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	st, err := procStart(pid)
	if err != nil {
		t.Fatal(err)
	}
	o := Owner{PID: pid, Start: st, BootID: bootID()}
	if !o.Alive() {
		t.Fatal("a running owner reads as dead")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Not waited for: the process stays a zombie.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); strings.Contains(string(b), ") Z ") {
			break
		}
	}
	if o.Alive() {
		t.Error("a zombie owner reads as alive; sweep would keep its sandbox")
	}
}
