//go:build linux

package backend

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/commlab/commlab/gpu"
	"github.com/commlab/commlab/labs/netns"
	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/labs/topology"
	"github.com/commlab/commlab/scenarios"
)

// Up implements session.Provider.
func (p Local) Up(ctx context.Context, env scenarios.Environment, ttl time.Duration, progress func(session.Progress)) (session.Env, error) {
	if err := p.Check(env); err != nil {
		return nil, err
	}
	t, err := topology.Load(env.Topology)
	if err != nil {
		return nil, err
	}
	opts := netns.Options{DataDir: p.DataDir, TTL: ttl, Logger: p.Log}
	if env.Kind == "gpu" {
		// A PyTorch process with a CUDA context takes 1-2 GiB of host memory, and the
		// learner's copies run beside the lab's own workload.
		opts.Limits.Memory = gpuLabMemory
	}
	sb, err := netns.New(t, opts)
	if err != nil {
		return nil, err
	}
	if env.Kind == "gpu" {
		progress(session.Progress{Note: fmt.Sprintf("GPU node %s (this host's GPUs, its own network namespace and cgroup)", sb.ID())})
	} else {
		progress(session.Progress{Note: fmt.Sprintf("virtual cluster %s (%s, %d nodes)", sb.ID(), t.Name, len(t.Nodes))})
	}
	if err := sb.Up(ctx); err != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = sb.Down(dctx)
		return nil, err
	}
	ne := &netnsEnv{sb: sb, exe: p.Exe}
	if env.Kind != "gpu" {
		return ne, nil
	}
	ge, err := p.gpuNode(ctx, ne, env.GPUs)
	if err != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = sb.Down(dctx)
		return nil, err
	}
	return ge, nil
}

// gpuNode makes the sandbox a GPU node with the host's first want GPUs, and checks
// that CUDA starts there as the learner will use it.
func (p Local) gpuNode(ctx context.Context, ne *netnsEnv, want int) (*gpuEnv, error) {
	if want < 1 {
		want = 1
	}
	lab, err := gpu.ForLab(want)
	if err != nil {
		return nil, needsGPUNode{err}
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		python = "/usr/bin/python3" // the check then says that PyTorch is missing
	}
	if python, err = filepath.Abs(python); err != nil {
		return nil, err
	}
	ge := &gpuEnv{netnsEnv: ne, python: python, inherited: gpuLabEnv(os.Environ(), lab)}
	if err := probeGPU(ctx, ne.sb, ne.Nodes()[0], ge.learnerPath(), python, ge.inherited, want); err != nil {
		return nil, err
	}
	return ge, nil
}

// hostCheck accepts: this host can build sandboxes (what it lacks, the probe says).
func hostCheck() error { return nil }
