// Package backend assembles the real parts a lab session (labs/session) runs on:
// network-namespace sandboxes (labs/netns), the collective benchmark running in their
// nodes (bench), the host's GPUs for gpu labs (gpu, nccl), and the journaled fault
// injector (injector).
package backend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/commlab/commlab/gpu"
	"github.com/commlab/commlab/injector"
	"github.com/commlab/commlab/labs/netns"
	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/labs/topology"
	"github.com/commlab/commlab/scenarios"
)

// Local brings labs up on this host: a cluster of network namespaces for netns
// labs, and for gpu labs a one-node sandbox whose workloads use the host's GPUs.
type Local struct {
	DataDir string
	Exe     string // the commlab binary: ranks run "commlab bench rank", GPU workloads "commlab gpu"
	Log     *slog.Logger
	// GPUs counts the host's GPUs; nil means gpu.Count (NVML).
	GPUs func() (int, error)
}

var _ session.Provider = Local{}

// Check implements session.Provider.
func (p Local) Check(env scenarios.Environment) error {
	if err := hostCheck(); err != nil {
		return err
	}
	switch env.Kind {
	case "", "netns":
		if _, err := topology.Load(env.Topology); err != nil {
			return err
		}
		// Refused here, before the learner waits for a lab that cannot start.
		if netns.FreeSlots() <= 0 {
			return fmt.Errorf("%w: all %d sandbox slots of this host are taken", netns.ErrBusy, topology.MaxSandboxes)
		}
		return nil
	case "gpu":
		count := p.GPUs
		if count == nil {
			count = gpu.Count
		}
		n, err := count()
		if err != nil {
			return needsGPUNode{err}
		}
		if n < env.GPUs {
			return needsGPUNode{fmt.Errorf("this lab needs %d GPUs in one node, this host has %d", env.GPUs, n)}
		}
		return nil
	}
	return fmt.Errorf("unknown environment kind %q", env.Kind)
}

// gpuLabMemory is a GPU lab's memory limit (namespace labs keep netns.DefaultMemory).
const gpuLabMemory = 16 << 30

// ErrNeedsGPUNode marks a gpu lab on a host without (enough) GPUs.
var ErrNeedsGPUNode = errors.New("this lab needs a GPU node")

// needsGPUNode is ErrNeedsGPUNode with the reason in its own words ("no NVIDIA driver:
// ... (GPU labs need a GPU node)"), which the lab page shows.
type needsGPUNode struct{ reason error }

func (e needsGPUNode) Error() string        { return e.reason.Error() }
func (e needsGPUNode) Unwrap() error        { return e.reason }
func (e needsGPUNode) Is(target error) bool { return target == ErrNeedsGPUNode }

// Faults lets labs apply and revert faults through the journaled injector.
type Faults struct{ In *injector.Injector }

var (
	_ session.Faults  = Faults{}
	_ session.Renewer = Faults{}
)

// Apply implements session.Faults.
func (f Faults) Apply(ctx context.Context, t injector.Target, kind string, params map[string]string, ttl time.Duration) (string, string, error) {
	fault, err := f.In.Registry().Parse(kind, params)
	if err != nil {
		return "", "", err
	}
	e, err := f.In.Apply(ctx, t, fault, ttl)
	if err != nil {
		return "", "", err
	}
	return e.ID, strings.Join(e.Command, "\n"), nil
}

// Revert implements session.Faults.
func (f Faults) Revert(ctx context.Context, id string) error { return f.In.Revert(ctx, id) }

// Renew implements session.Renewer: the fault's deadline moves to now+ttl.
func (f Faults) Renew(_ context.Context, id string, ttl time.Duration) error {
	_, err := f.In.Renew(id, ttl)
	return err
}

// ChangesLogin implements session.Faults.
func (f Faults) ChangesLogin(kind string) bool { return f.In.ChangesLogin(kind) }

// Supports implements session.Faults.
func (f Faults) Supports(ctx context.Context, kind string) error { return f.In.Supports(ctx, kind) }

// OpenInjector opens the journaled injector; a nil opts.Registry means every built-in
// fault kind.
func OpenInjector(opts injector.Options) (*injector.Injector, error) {
	if opts.Registry == nil {
		reg, err := injector.NewRegistry(injector.Builtin()...)
		if err != nil {
			return nil, err
		}
		opts.Registry = reg
	}
	return injector.Open(opts)
}
