package injector

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// cfsPeriod is the CPU bandwidth period cpu-squeeze uses, in microseconds.
const cfsPeriod = 100000

// CPUSqueeze starves the node's workloads of CPU: a CFS quota on their cgroup
// (cpus), a cpuset of one or a few cores (cpuset), or both. The prior values
// are journaled and written back on revert.
type CPUSqueeze struct {
	CPUs   float64 `json:"cpus" param:"cpus" doc:"CPU time allowed, in cores (0.01 to 1024), e.g. 0.2"`
	CPUSet CPUList `json:"cpuset" param:"cpuset" doc:"CPUs the workloads may run on, e.g. 0 (one core)"`
}

var _ Fault = (*CPUSqueeze)(nil)

// CPUSqueezeKind registers cpu-squeeze.
func CPUSqueezeKind() Kind {
	return Kind{Name: "cpu-squeeze", Summary: "limit the workload cgroup's CPU (quota or a one-core cpuset)",
		Needs: []Feature{NeedCgroup},
		New:   func() Fault { return &CPUSqueeze{} }, NewUndo: func() Undo { return &cgroupUndo{} }}
}

// Kind implements Fault.
func (f *CPUSqueeze) Kind() string { return "cpu-squeeze" }

// Validate implements Fault.
func (f *CPUSqueeze) Validate() error {
	if f.CPUs == 0 && f.CPUSet == "" {
		return invalid("give cpus (a CPU quota in cores) or cpuset (CPUs to pin to), or both")
	}
	if f.CPUs != 0 && (f.CPUs < 0.01 || f.CPUs > 1024) {
		return invalid("cpus %g: want 0.01 to 1024 cores", f.CPUs)
	}
	return nil
}

func (f *CPUSqueeze) claims() []string {
	var c []string
	if f.CPUs != 0 {
		c = append(c, "cgroup-cpu")
	}
	if f.CPUSet != "" {
		c = append(c, "cgroup-cpuset")
	}
	return c
}

func (f *CPUSqueeze) quota() int64 { return int64(f.CPUs * cfsPeriod) }

// Command implements Fault.
func (f *CPUSqueeze) Command(t Target) []string {
	var out []string
	if f.CPUs != 0 {
		if cgMode() == "v2" {
			out = append(out, fmt.Sprintf("echo '%d %d' > %s/cpu.max", f.quota(), cfsPeriod, cgroupPath("cpu", t.Cgroup)))
		} else {
			out = append(out, fmt.Sprintf("echo %d > %s/cpu.cfs_quota_us", f.quota(), cgroupPath("cpu", t.Cgroup)))
		}
	}
	if f.CPUSet != "" {
		out = append(out, fmt.Sprintf("echo %s > %s/cpuset.cpus", f.CPUSet, cgroupPath("cpuset", t.Cgroup)))
	}
	return out
}

// Apply implements Fault.
func (f *CPUSqueeze) Apply(ctx context.Context, t Target, op *Op) (Undo, error) {
	var files []cgFile
	if f.CPUs != 0 {
		dir, err := needCgroup(t, "cpu")
		if err != nil {
			return nil, err
		}
		if cgMode() == "v2" {
			files = append(files, cgFile{Path: filepath.Join(dir, "cpu.max"), Value: fmt.Sprintf("%d %d", f.quota(), cfsPeriod)})
		} else {
			files = append(files,
				cgFile{Path: filepath.Join(dir, "cpu.cfs_period_us"), Value: fmt.Sprint(cfsPeriod)},
				cgFile{Path: filepath.Join(dir, "cpu.cfs_quota_us"), Value: fmt.Sprint(f.quota())})
		}
	}
	if f.CPUSet != "" {
		dir, err := needCgroup(t, "cpuset")
		if err != nil {
			return nil, err
		}
		if err := cpusOnline(f.CPUSet); err != nil {
			return nil, err
		}
		files = append(files, cgFile{Path: filepath.Join(dir, "cpuset.cpus"), Value: string(f.CPUSet)})
	}
	return applyChecked(ctx, t, op, files)
}

// cpusOnline checks that every CPU of list is online.
func cpusOnline(list CPUList) error {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return fmt.Errorf("read online CPUs: %w", err)
	}
	online := map[int]bool{}
	for _, c := range CPUList(strings.TrimSpace(string(b))).cpus() {
		online[c] = true
	}
	for _, c := range list.cpus() {
		if !online[c] {
			return invalid("cpuset %s: CPU %d is not online (online: %s)", list, c, strings.TrimSpace(string(b)))
		}
	}
	return nil
}

// expandSame compares two CPU lists by their members (the kernel rewrites 0,1 as 0-1).
func expandSame(a, b string) bool {
	return fmt.Sprint(CPUList(a).cpus()) == fmt.Sprint(CPUList(b).cpus())
}
