//go:build linux

package cgroup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/commlab/commlab/internal/testenv"
)

func needRoot(t *testing.T) {
	t.Helper()
	testenv.RequireRoot(t, "cgroups")
}

func TestCheckPath(t *testing.T) {
	for _, tt := range []struct {
		rel string
		ok  bool
	}{
		{"commlab/abc", true},
		{"commlab/abc/node1", true},
		{"commlab", false},
		{"system.slice/x", false},
		{"commlab/../x", false},
		{"commlab//x", false},
		{"/commlab/x", false},
		{"commlab/a b", false},
		{"commlab/a;rm", false},
		{"commlab/.", false},
		{"commlab/k3f9a2/gpu-a.1", true},
	} {
		if err := CheckPath(tt.rel); (err == nil) != tt.ok {
			t.Errorf("CheckPath(%q) = %v, want ok=%v", tt.rel, err, tt.ok)
		}
	}
}

// TestLifecycle creates a limited group, starts a process in a child through
// Prepare and Place, checks the limits and membership, then destroys it all.
func TestLifecycle(t *testing.T) {
	needRoot(t)
	rel := fmt.Sprintf("commlab/cgtest%d", os.Getpid())
	g, err := New(rel, Limits{Pids: 64, Memory: 256 << 20, CPUs: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Destroy(context.Background()) })
	child, err := g.Child("node1", Limits{})
	if err != nil {
		t.Fatal(err)
	}

	want := map[string]string{"pids.max": "64"}
	if Unified() {
		want["memory.max"] = "268435456"
		want["cpu.max"] = "50000 100000"
	} else {
		want["memory.limit_in_bytes"] = "268435456"
		want["cpu.cfs_quota_us"] = "50000"
	}
	for f, w := range want {
		if got, err := g.Read(f); err != nil || got != w {
			t.Errorf("%s = %q, %v; want %q", f, got, err, w)
		}
	}
	// A child's CPU weight, against a sibling at the default.
	light, err := g.Child("light", Limits{CPUWeight: 10})
	if err != nil {
		t.Fatal(err)
	}
	weightFile, light10, dflt := "cpu.weight", "10", "100"
	if !Unified() {
		weightFile, light10, dflt = "cpu.shares", "102", "1024"
	}
	for _, c := range []struct {
		g    *Group
		want string
	}{{light, light10}, {child, dflt}} {
		if got, err := c.g.Read(weightFile); err != nil || got != c.want {
			t.Errorf("%s %s = %q, %v; want %q", c.g.Path(), weightFile, got, err, c.want)
		}
	}

	// A weight rewritten later (a graded run's, see labs/netns.Sandbox.Prioritize),
	// and back to the default, leaves the other limits alone.
	for _, w := range []uint64{10000, DefaultCPUWeight} {
		if err := g.SetCPUWeight(w); err != nil {
			t.Fatal(err)
		}
		want := strconv.FormatUint(w, 10)
		if !Unified() {
			want = strconv.FormatUint(V1Shares(w), 10)
		}
		if got, err := g.Read(weightFile); err != nil || got != want {
			t.Errorf("after SetCPUWeight(%d): %s = %q, %v; want %q", w, weightFile, got, err, want)
		}
		if got, err := g.Read("pids.max"); err != nil || got != "64" {
			t.Errorf("after SetCPUWeight(%d): pids.max = %q, %v; want 64", w, got, err)
		}
	}
	if err := g.SetCPUWeight(0); err == nil {
		t.Error("SetCPUWeight(0) succeeded; want an error")
	}

	cmd := exec.Command("sleep", "30")
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // Place must run on the thread that started the process
		defer runtime.UnlockOSThread()
		cmd.SysProcAttr = &syscall.SysProcAttr{}
		pl, err := child.Prepare(cmd.SysProcAttr)
		if err != nil {
			errc <- err
			return
		}
		defer pl.Close()
		if err := cmd.Start(); err != nil {
			errc <- err
			return
		}
		errc <- pl.Place(cmd.Process.Pid)
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	go cmd.Wait()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "/"+rel+"/node1\n") {
		t.Errorf("sleep is not in %s/node1:\n%s", rel, b)
	}
	// The test's own threads stay where they were.
	self, _ := os.ReadFile("/proc/self/cgroup")
	if strings.Contains(string(self), rel) {
		t.Errorf("the test process joined the group:\n%s", self)
	}
	pids, err := g.Procs()
	if err != nil || !slices.Contains(pids, cmd.Process.Pid) {
		t.Errorf("Procs() = %v, %v; want it to hold %d", pids, err, cmd.Process.Pid)
	}
	names, err := Children(Root)
	if err != nil || !slices.Contains(names, strings.TrimPrefix(rel, "commlab/")) {
		t.Errorf("Children(commlab) = %v, %v", names, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if g.Exists() || child.Exists() {
		t.Errorf("group still exists after Destroy: %v", g.Dirs())
	}
	if err := syscall.Kill(cmd.Process.Pid, 0); err == nil {
		// The zombie may linger until Wait reaps it; it must not be running.
		st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
		if f := strings.Fields(string(st)); len(f) > 2 && f[2] != "Z" {
			t.Errorf("sleep survived Destroy: state %s", f[2])
		}
	}
	if err := g.Destroy(ctx); err != nil {
		t.Errorf("second Destroy: %v", err)
	}
	// A weight put back after the group went (a graded run that outlived its lab)
	// fails and does not make the group again.
	if err := g.SetCPUWeight(DefaultCPUWeight); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("SetCPUWeight on a removed group: %v, want fs.ErrNotExist", err)
	}
	if g.Exists() {
		t.Errorf("SetCPUWeight made the removed group again: %v", g.Dirs())
	}
}

func TestRefusesForeignPaths(t *testing.T) {
	if _, err := New("system.slice/evil", Limits{}); err == nil {
		t.Fatal("New outside commlab/ succeeded")
	}
	if _, err := Open("commlab/../../x"); err == nil {
		t.Fatal("Open with .. succeeded")
	}
}
