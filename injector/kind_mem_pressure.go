package injector

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
)

// MemPressure caps the memory of the node's workload cgroup (memory.limit_in_bytes
// on cgroup v1, memory.max on v2), so the workload reclaims, swaps or is
// OOM-killed. The prior limit is journaled and written back on revert.
type MemPressure struct {
	Limit Size `json:"limit" param:"limit,required" doc:"memory limit, 4MiB to 1TiB, e.g. 256MiB"`
}

var _ Fault = (*MemPressure)(nil)

// MemPressureKind registers mem-pressure.
func MemPressureKind() Kind {
	return Kind{Name: "mem-pressure", Summary: "cap the workload cgroup's memory",
		Needs: []Feature{NeedCgroup},
		New:   func() Fault { return &MemPressure{} }, NewUndo: func() Undo { return &cgroupUndo{} }}
}

// Kind implements Fault.
func (f *MemPressure) Kind() string { return "mem-pressure" }

// Validate implements Fault.
func (f *MemPressure) Validate() error {
	if f.Limit < 4<<20 || f.Limit > 1<<40 {
		return invalid("limit %s: want 4MiB to 1TiB", f.Limit)
	}
	return nil
}

func (f *MemPressure) claims() []string { return []string{"cgroup-memory"} }

func memFile() string {
	if cgMode() == "v2" {
		return "memory.max"
	}
	return "memory.limit_in_bytes"
}

// Command implements Fault.
func (f *MemPressure) Command(t Target) []string {
	return []string{fmt.Sprintf("echo %d > %s/%s", uint64(f.Limit), cgroupPath("memory", t.Cgroup), memFile())}
}

// Apply implements Fault.
func (f *MemPressure) Apply(ctx context.Context, t Target, op *Op) (Undo, error) {
	dir, err := needCgroup(t, "memory")
	if err != nil {
		return nil, err
	}
	p := filepath.Join(dir, memFile())
	u, err := applyCgroupFiles(t, op, []cgFile{{Path: p, Value: fmt.Sprint(uint64(f.Limit))}})
	if errors.Is(err, syscall.EBUSY) {
		return u, fmt.Errorf("the workloads of %s use more than %s and the kernel could not reclaim enough: %w", t, f.Limit, err)
	}
	if err != nil {
		return u, err
	}
	got, err := readCgroupFile(p)
	if err != nil {
		return u, err
	}
	// The kernel rounds the limit down to whole pages.
	if want := fmt.Sprint(uint64(f.Limit) &^ 4095); got != want && got != fmt.Sprint(uint64(f.Limit)) {
		return u, fmt.Errorf("read back %s: %s, wrote %d", p, got, uint64(f.Limit))
	}
	return u, ctx.Err()
}
