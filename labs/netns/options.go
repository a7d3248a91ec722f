package netns

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/commlab/commlab/labs/cgroup"
)

// Errors of this backend; test them with errors.Is.
var (
	// ErrNoSandbox marks a sandbox id with no state file.
	ErrNoSandbox = errors.New("no such sandbox")
	// ErrBusy marks a host that cannot take another sandbox now.
	ErrBusy = errors.New("no room for another sandbox")
)

// Defaults for Options' zero values.
const (
	DefaultTTL            = 2 * time.Hour
	DefaultPids           = 2048
	DefaultMemory         = 2 << 30
	DefaultHomeSize       = 64 << 20
	DefaultLearnerUIDBase = 2_000_000_000
)

// Options configure a sandbox; the zero value works (with a data directory).
type Options struct {
	// DataDir holds the state files (<DataDir>/sandboxes/<id>.json). Required.
	DataDir string
	// ID names the sandbox (1-12 of [a-z0-9]); empty picks a random one.
	ID string
	// TTL bounds the sandbox's life; 0 means DefaultTTL.
	TTL time.Duration
	// Limits bound the sandbox's processes; zero fields take DefaultPids,
	// DefaultMemory and 3/4 of the host's CPUs.
	Limits cgroup.Limits
	// LearnerUIDBase: learner shells run as uid (and gid) LearnerUIDBase+index,
	// one uid per sandbox, so sandboxes cannot touch each other's processes
	// or files. No passwd entry is needed. 0 means DefaultLearnerUIDBase.
	LearnerUIDBase uint32
	// HomeSize bounds the learner's /home and /tmp (one tmpfs per sandbox);
	// 0 means DefaultHomeSize.
	HomeSize int64
	// Detached records no owner process: the sandbox outlives this process
	// and goes only with Down, its TTL, or a sweep after the TTL.
	Detached bool
	// Logger receives debug and teardown messages; nil means slog.Default().
	Logger *slog.Logger
}

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

// SweepOptions narrow a sweep.
type SweepOptions struct {
	// Match, if set, limits the sweep to the sandbox ids it accepts (tests use
	// it so as to leave other sandboxes on the host alone).
	Match func(id string) bool
	// Logger receives one line per removed sandbox; nil means slog.Default().
	Logger *slog.Logger
	// UnrecordedGrace spares commlab-named objects that no state file or slot
	// lease claims while they are younger than this: Up records a sandbox
	// before creating anything, so such objects come from other tools (or
	// tests) building namespaces by hand, possibly right now. Zero means
	// DefaultUnrecordedGrace; negative means no grace.
	UnrecordedGrace time.Duration
}

// DefaultUnrecordedGrace is how long Sweep leaves unclaimed objects alone.
const DefaultUnrecordedGrace = 10 * time.Minute
