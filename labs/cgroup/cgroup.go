// Package cgroup gives a lab sandbox its control group: created with pids,
// memory and CPU limits under commlab/, entered by the processes the sandbox
// starts, and emptied and removed at teardown. It works on cgroup v2 (one
// unified tree) and on v1 or hybrid hosts (one directory per controller: pids,
// memory, cpu), detecting which with containerd/cgroups.
//
// Groups are named by their path relative to each hierarchy's root, e.g.
// "commlab/k3f9a2/node1"; only paths under commlab/ are accepted, so nothing
// else on the host is ever written or removed.
package cgroup

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/commlab/commlab/internal/host"
)

// Root is the parent of every commlab cgroup, relative to a hierarchy root.
const Root = host.CgroupRoot

// MountRoot is where cgroup hierarchies are mounted.
const MountRoot = "/sys/fs/cgroup"

// Limits bound what a sandbox may use; a zero field leaves that resource unlimited.
type Limits struct {
	// Pids is the most tasks (processes and threads) at once: contains fork bombs.
	Pids int64 `json:"pids"`
	// Memory is the most memory in bytes (page cache and tmpfs included).
	Memory int64 `json:"memory"`
	// CPUs is the CPU bandwidth in CPUs, e.g. 1.5.
	CPUs float64 `json:"cpus"`
	// CPUWeight is the group's share of CPU against its siblings when they contend,
	// in cgroup v2 cpu.weight units (1 to 10000; the kernel's default is 100). On
	// v1 it is written as cpu.shares, scaled to that file's default of 1024.
	CPUWeight uint64 `json:"cpu_weight,omitempty"`
}

// DefaultCPUWeight is the kernel's cpu.weight of a new group.
const DefaultCPUWeight = 100

// V1Shares is weight (cpu.weight units) as cgroup v1 cpu.shares: 100 is 1024, and
// the kernel's minimum of 2 is the floor.
func V1Shares(weight uint64) uint64 { return max(weight*1024/DefaultCPUWeight, 2) }

// Group is one cgroup, present in every hierarchy commlab uses.
type Group struct {
	rel string
	v2  bool
}

// reSegment is one plain path segment: no '/', no "." or "..", no blanks or
// shell metacharacters.
var reSegment = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`)

// CheckPath refuses cgroup paths outside commlab/ and any that could climb out;
// the injector checks a fault's target with it too.
func CheckPath(rel string) error {
	segs := strings.Split(rel, "/")
	if len(segs) < 2 || segs[0] != Root {
		return fmt.Errorf("cgroup %q: want a path under %s/, e.g. %s/<sandbox>/<node>", rel, Root, Root)
	}
	for _, s := range segs[1:] {
		if s == "." || s == ".." || !reSegment.MatchString(s) {
			return fmt.Errorf("cgroup %q: segment %q is not a plain name", rel, s)
		}
	}
	return nil
}
