package slurm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/commlab/commlab/injector"
	"github.com/commlab/commlab/labs"
	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/labs/topology"
	"github.com/commlab/commlab/scenarios"
)

// Provider brings labs up as Slurm jobs (the `slurm` environment).
type Provider struct {
	Config *Config
	Hub    *Hub
	// Agent is the commlab binary on the nodes; empty means Config.Agent, then
	// this executable.
	Agent string
}

var _ session.Provider = (*Provider)(nil)

// Check implements session.Provider: the topology must load and sbatch be here.
func (p *Provider) Check(env scenarios.Environment) error {
	if _, err := topology.Load(env.Topology); err != nil {
		return err
	}
	for _, tool := range []string{"sbatch", "squeue", "scancel"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%w: %s not found (the slurm environment runs on a Slurm login node)", labs.ErrUnsupported, tool)
		}
	}
	return nil
}

// Up implements session.Provider: it submits the lab's job, tells progress the
// queue state whenever it changes, and returns once every node's agent is in.
func (p *Provider) Up(ctx context.Context, env scenarios.Environment, ttl time.Duration, progress func(string)) (session.Env, error) {
	if err := p.Check(env); err != nil {
		return nil, err
	}
	t, err := topology.Load(env.Topology)
	if err != nil {
		return nil, err
	}
	agent := p.Agent
	if agent == "" {
		agent = p.Config.Agent
	}
	if agent == "" {
		if agent, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	lab := newLabID()
	nodes := t.NodeNames()
	token, err := p.Hub.Register(lab, nodes)
	if err != nil {
		return nil, err
	}
	e := &Env{hub: p.Hub, lab: lab, nodes: nodes}
	script := p.Config.Script(JobSpec{Lab: lab, Nodes: nodes, GPUs: env.GPUs, TTL: ttl, Agent: agent})
	e.job, err = submit(ctx, script, map[string]string{
		EnvURL: p.Config.AgentURL, EnvToken: token, EnvLab: lab, EnvNodes: strings.Join(nodes, ","),
	})
	if err != nil {
		p.Hub.Forget(lab)
		return nil, err
	}
	if err := e.wait(ctx, progress); err != nil {
		dctx, stop := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer stop()
		return nil, errors.Join(err, e.Down(dctx))
	}
	return e, nil
}

// wait polls squeue until every agent has said hello, or the job has ended.
func (e *Env) wait(ctx context.Context, progress func(string)) error {
	last := ""
	for {
		if len(e.hub.Connected(e.lab)) == len(e.nodes) {
			progress(fmt.Sprintf("Slurm job %s: %d node agents connected", e.job, len(e.nodes)))
			return nil
		}
		q, err := Queue(ctx, e.job)
		if err != nil {
			return err
		}
		if q.Gone() {
			return fmt.Errorf("Slurm job %s ended (%s) before its agents connected", e.job, q.State)
		}
		if s := q.String(); s != last {
			progress(s)
			last = s
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-e.hub.Changed(e.lab):
		case <-time.After(time.Second):
		}
	}
}

// Env is one lab's Slurm job seen by the lab session.
type Env struct {
	hub   *Hub
	lab   string
	job   string
	nodes []string
}

var _ session.Env = (*Env)(nil)

// Job is the lab's Slurm job id.
func (e *Env) Job() string { return e.job }

// ID implements session.Env: the nodes' sandbox id.
func (e *Env) ID() string { return SandboxID(e.job) }

// Nodes implements session.Env.
func (e *Env) Nodes() []string { return e.nodes }

// Target implements session.Env. The target is on the node, not on this host:
// faults go through [Env.Apply], which the node's agent carries out.
func (e *Env) Target(node string) injector.Target { return NodeTarget(e.job, node) }

// Run runs argv in node's sandbox and returns its output and exit status.
func (e *Env) Run(ctx context.Context, node string, argv ...string) (string, int, error) {
	rep, err := e.hub.Call(ctx, e.lab, node, Frame{Op: opExec, Argv: argv})
	return rep.Output, rep.Exit, err
}

// Apply applies a fault on node through its agent's journaled injector and
// returns the fault's id and equivalent command.
func (e *Env) Apply(ctx context.Context, node, kind string, params map[string]string, ttl time.Duration) (string, string, error) {
	rep, err := e.hub.Call(ctx, e.lab, node, Frame{Op: opApply, Kind: kind, Params: params, TTL: ttl})
	return rep.Fault, rep.Output, err
}

// Revert reverts fault id on node.
func (e *Env) Revert(ctx context.Context, node, id string) error {
	_, err := e.hub.Call(ctx, e.lab, node, Frame{Op: opRevert, Fault: id})
	return err
}

// Shell implements session.Env; terminals through the agent are not built yet.
func (e *Env) Shell(context.Context, string, string) (session.PTY, error) {
	return nil, fmt.Errorf("%w: learner terminals on Slurm nodes", labs.ErrUnsupported)
}

// Workload implements session.Env; workloads through the agent are not built yet.
func (e *Env) Workload(context.Context, *scenarios.Workload, []string, io.Writer) (float64, error) {
	return 0, fmt.Errorf("%w: workloads on Slurm nodes", labs.ErrUnsupported)
}

// Down implements session.Env: scancel, then wait until the job has left its
// nodes (the agents have reverted their faults; the epilog has swept).
func (e *Env) Down(ctx context.Context) error {
	defer e.hub.Forget(e.lab)
	if e.job == "" {
		return nil
	}
	return cancel(ctx, e.job)
}

func newLabID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
