package netns

import (
	"fmt"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// Bounds of Options: a zero field takes its default, anything else must lie
// within these (a negative or absurd value is an error, never a silent default).
const (
	// MinTTL is what a person may ask for (`lab up --ttl`): long enough to build
	// the sandbox and use it. Tests go lower, so check leaves it to the caller.
	MinTTL      = time.Minute
	MaxTTL      = 7 * 24 * time.Hour
	MinPids     = 64 // a shell per node, the workload's ranks and their threads
	MaxPids     = 1 << 22
	MinMemory   = 128 << 20
	MinHomeSize = 1 << 20
)

// check refuses options out of their bounds, naming the flag-like field.
func (o Options) check() error {
	switch {
	case o.TTL < 0 || o.TTL > MaxTTL:
		return fmt.Errorf("ttl %v: want at most %v (0: %v)", o.TTL, MaxTTL, DefaultTTL)
	case o.Limits.Pids < 0 || o.Limits.Pids > 0 && o.Limits.Pids < MinPids || o.Limits.Pids > MaxPids:
		return fmt.Errorf("pids %d: want %d to %d (0: %d)", o.Limits.Pids, MinPids, MaxPids, DefaultPids)
	case o.Limits.CPUs < 0 || o.Limits.CPUs > float64(runtime.NumCPU()):
		return fmt.Errorf("cpus %g: want more than 0 and at most this host's %d (0: 3/4 of them)", o.Limits.CPUs, runtime.NumCPU())
	}
	ram := hostRAM()
	if m := o.Limits.Memory; m < 0 || m > 0 && m < MinMemory || ram > 0 && m > ram {
		return fmt.Errorf("memory %d bytes: want %d MiB to this host's %d MiB (0: %d MiB)", m, MinMemory>>20, ram>>20, DefaultMemory>>20)
	}
	mem := o.Limits.Memory
	if mem == 0 {
		mem = DefaultMemory
	}
	// The learner's tmpfs pages count against the sandbox's memory.
	if h := o.HomeSize; h < 0 || h > 0 && h < MinHomeSize || h > mem {
		return fmt.Errorf("home size %d bytes: want %d MiB to the sandbox's memory, %d MiB (0: %d MiB)", h, MinHomeSize>>20, mem>>20, DefaultHomeSize>>20)
	}
	return nil
}

// hostRAM is the host's memory in bytes, 0 if unknown.
func hostRAM() int64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}
