//go:build linux

package backend

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/bench"
	"github.com/commlab/commlab/internal/host"
	"github.com/commlab/commlab/internal/testenv"
	"github.com/commlab/commlab/internal/testlab"
	"github.com/commlab/commlab/labs/cgroup"
	"github.com/commlab/commlab/labs/netns"
	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/scenarios"
)

// A lab's workload (the ranks the lab starts, through the starter the launcher
// uses) runs in its node's workload leaf at the lower CPU weight; a learner's shell
// runs in the shell leaf at the default; the sandbox going down removes both.
func TestWorkloadBelowShells(t *testing.T) {
	testenv.RequireRoot(t, "network namespaces and cgroups")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env, err := Local{DataDir: t.TempDir(), Exe: "/bin/true", Log: slog.New(slog.DiscardHandler)}.Up(ctx,
		scenarios.Environment{Kind: "netns", Topology: "2x1"}, 5*time.Minute, func(session.Progress) {})
	if err != nil {
		t.Fatal(err)
	}
	ne := env.(*netnsEnv)
	id := ne.sb.ID()
	defer func() {
		if err := env.Down(context.Background()); err != nil {
			t.Error(err)
		}
		if left := testlab.Leftovers(id); len(left) > 0 {
			t.Errorf("left after Down: %v", left)
		}
	}()

	rank, err := sandboxStarter{env: ne}.Start(ctx, bench.Spec{Node: "node1", Argv: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rank.Kill(); _ = rank.Wait() }()
	self, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", rank.Pid()))
	if err != nil {
		t.Fatal(err)
	}

	shell := inShell(ctx, t, env, "node1", "echo; cat /proc/self/cgroup")

	node := host.NodeCgroup(id, "node1")
	for _, c := range []struct {
		who, procCgroup, leaf string
		weight                uint64
	}{
		{"rank", string(self), host.WorkloadLeaf, netns.WorkloadCPUWeight},
		{"shell", strings.ReplaceAll(string(shell), "\r", ""), host.ShellLeaf, cgroup.DefaultCPUWeight},
	} {
		want := node + "/" + c.leaf
		got := cpuCgroupOf(c.procCgroup)
		if !slices.Contains(got, want) {
			t.Errorf("%s: cpu cgroup %v, want %s:\n%s", c.who, got, want, c.procCgroup)
			continue
		}
		file, w := "cpu.weight", c.weight
		if !cgroup.Unified() {
			file, w = "cpu.shares", cgroup.V1Shares(c.weight)
		}
		b, err := os.ReadFile(filepath.Join(cgroup.Dir("cpu", want), file))
		if n, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err != nil || n != w {
			t.Errorf("%s: %s of %s = %q, %v; want %d", c.who, file, want, b, err, w)
		}
	}
	if netns.WorkloadCPUWeight >= cgroup.DefaultCPUWeight {
		t.Errorf("workload weight %d is not below the shells' %d", netns.WorkloadCPUWeight, cgroup.DefaultCPUWeight)
	}
}

// reCPULine is a /proc/PID/cgroup line of the cpu controller: v1 "N:cpu,...:/path"
// or the v2 "0::/path".
var reCPULine = regexp.MustCompile(`(?m)^\d+:(?:[^:\n]*\bcpu\b[^:\n]*|):/(\S*)$`)

// cpuCgroupOf lists the cgroup paths (relative, as labs/cgroup names them) of the
// lines of a /proc/PID/cgroup text that place it for CPU.
func cpuCgroupOf(text string) []string {
	var out []string
	for _, m := range reCPULine.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}
