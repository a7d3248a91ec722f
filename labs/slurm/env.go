package slurm

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/commlab/commlab/bench"
	"github.com/commlab/commlab/injector"
	"github.com/commlab/commlab/labs"
	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/labs/topology"
	"github.com/commlab/commlab/nccl"
	"github.com/commlab/commlab/scenarios"
)

// Provider brings labs up as Slurm jobs (the `slurm` environment).
type Provider struct {
	Config *Config
	Hub    *Hub
	// Agent is the commlab binary on the nodes; empty means Config.Agent, then
	// this executable.
	Agent string
	// AgentEnv is added to the agents' environment (how they trust a TLS
	// server: EnvCA or EnvPin).
	AgentEnv map[string]string
	// Poll is how often a running lab's job is looked up in squeue (default
	// 5 s); AgentGrace how long a node's agent may stay away before the lab is
	// lost (default 30 s: it redials every second).
	Poll, AgentGrace time.Duration

	mu    sync.Mutex
	addrs map[int]bool // the address slices of labs up or coming up
}

// takeAddrIndex reserves an address slice no other lab of p holds.
func (p *Provider) takeAddrIndex() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.addrs == nil {
		p.addrs = map[int]bool{}
	}
	for i := range topology.MaxSandboxes {
		if !p.addrs[i] {
			p.addrs[i] = true
			return i, nil
		}
	}
	return 0, fmt.Errorf("%d Slurm labs are up: every address slice is taken", topology.MaxSandboxes)
}

func (p *Provider) freeAddrIndex(i int) {
	p.mu.Lock()
	delete(p.addrs, i)
	p.mu.Unlock()
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
func (p *Provider) Up(ctx context.Context, env scenarios.Environment, ttl time.Duration, progress func(session.Progress)) (session.Env, error) {
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
	addr, err := p.takeAddrIndex()
	if err != nil {
		return nil, err
	}
	token, err := p.Hub.Register(lab, nodes)
	if err != nil {
		p.freeAddrIndex(addr)
		return nil, err
	}
	e := &Env{hub: p.Hub, lab: lab, nodes: nodes, linked: len(p.Config.LabNICs) > 0, lost: make(chan error, 1), done: make(chan struct{}),
		free: func() { p.freeAddrIndex(addr) }}
	script := p.Config.Script(JobSpec{Lab: lab, Nodes: nodes, GPUs: env.GPUs, TTL: ttl, Agent: agent})
	jobEnv := map[string]string{
		EnvURL: p.Config.AgentURL, EnvToken: token, EnvLab: lab, EnvNodes: strings.Join(nodes, ","),
		EnvTopology: env.Topology, EnvAddrIndex: strconv.Itoa(addr), EnvLabNICs: strings.Join(p.Config.LabNICs, ","),
	}
	maps.Copy(jobEnv, p.AgentEnv)
	e.job, err = submit(ctx, script, jobEnv)
	if err != nil {
		p.Hub.Forget(lab)
		e.free()
		return nil, err
	}
	if err := e.wait(ctx, progress); err != nil {
		dctx, stop := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer stop()
		return nil, errors.Join(err, e.Down(dctx))
	}
	go e.watch(cmp.Or(p.Poll, 5*time.Second), cmp.Or(p.AgentGrace, 30*time.Second))
	return e, nil
}

// watch tells Lost when the job has left the queue or a node's agent has been
// away longer than grace. An unreachable slurmctld loses nothing: the job and
// its agents outlive a controller restart.
func (e *Env) watch(poll, grace time.Duration) {
	away := map[string]time.Time{}
	for {
		select {
		case <-e.done:
			return
		case <-time.After(poll):
		}
		ctx, cancel := context.WithTimeout(context.Background(), poll+10*time.Second)
		q, err := Queue(ctx, e.job)
		cancel()
		if err == nil && q.Gone() {
			e.lost <- fmt.Errorf("its Slurm job %s ended (%s)", e.job, q.end())
			return
		}
		in := e.hub.Connected(e.lab)
		for _, n := range e.nodes {
			if _, ok := in[n]; ok {
				delete(away, n)
				continue
			}
			if away[n].IsZero() {
				away[n] = time.Now()
			} else if d := time.Since(away[n]); d > grace {
				e.lost <- fmt.Errorf("the agent of node %s (Slurm job %s) has been away for %s", n, e.job, d.Round(time.Second))
				return
			}
		}
	}
}

// wait polls squeue until every agent has said hello, or the job has ended.
func (e *Env) wait(ctx context.Context, progress func(session.Progress)) error {
	last := ""
	for {
		if len(e.hub.Connected(e.lab)) == len(e.nodes) {
			progress(session.Progress{Note: fmt.Sprintf("Slurm job %s: %d node agents connected", e.job, len(e.nodes))})
			return nil
		}
		q, err := Queue(ctx, e.job)
		if err != nil {
			return err
		}
		if q.Gone() {
			return fmt.Errorf("Slurm job %s ended (%s) before its agents connected", e.job, q.end())
		}
		if s := q.String(); s != last {
			progress(session.Progress{Note: s, Queue: q.Waiting()})
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
	hub    *Hub
	lab    string
	job    string
	nodes  []string
	linked bool // the nodes' NICs are macvlans of the site's lab NICs
	lost   chan error
	done   chan struct{} // closed by Down: the watch ends
	free   func()        // gives the lab's address slice back, once the job is gone
	once   sync.Once
	freed  sync.Once
	// started, if set, is told about every rank a workload starts (tests).
	started func(rank int, node string, p bench.Proc)
}

var (
	_ session.Env        = (*Env)(nil)
	_ session.NodeFaults = (*Env)(nil)
	_ session.Losable    = (*Env)(nil)
)

// Lost implements session.Losable: the job ended under the lab, or a node's
// agent stayed away.
func (e *Env) Lost() <-chan error { return e.lost }

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

// Shell implements session.Env: a bash on node, run by its agent as the
// learner (uid LearnerUID, CAP_NET_ADMIN and CAP_NET_RAW in the node's own
// user namespace, its own PID namespace) in the node's namespace, its terminal
// streamed through the hub.
func (e *Env) Shell(ctx context.Context, node, rc string) (session.PTY, error) {
	c, err := e.hub.Stream(ctx, e.lab, node, Frame{Op: opShell, RC: rc, Rows: 32, Cols: 120})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Workload implements session.Env: commlab bench with its ranks placed on
// the lab's nodes (w.Hosts; default one rank on every node), each started by
// its node's agent, and returns the average bus bandwidth. Ranks on several
// nodes talk over the nodes' NICs, macvlan children of the site's lab NICs;
// without lab NICs the nodes are not linked, and such a workload is refused.
func (e *Env) Workload(ctx context.Context, w *scenarios.Workload, env []string, out io.Writer) (float64, error) {
	if len(w.Bench) == 0 {
		return 0, fmt.Errorf("%w: GPU workloads on Slurm nodes", labs.ErrUnsupported)
	}
	hosts := strings.Join(w.Hosts, ",")
	if hosts == "" {
		var hs []string
		for _, n := range e.nodes {
			hs = append(hs, n+":1")
		}
		hosts = strings.Join(hs, ",")
	}
	o, _, err := bench.ParseArgs(append(slices.Clone(w.Bench), "--hosts", hosts))
	if err != nil {
		return 0, err
	}
	for _, h := range o.Hosts {
		if !slices.Contains(e.nodes, h.Node) {
			return 0, fmt.Errorf("workload --hosts %s: no node %q in this lab", hosts, h.Node)
		}
		if h.Node != o.Hosts[0].Node && !e.linked {
			return 0, fmt.Errorf("%w: a workload across nodes (--hosts %s) on Slurm: the nodes are linked only "+
				"through the site's lab NICs (cluster.lab_nics), and none are configured", labs.ErrUnsupported, hosts)
		}
	}
	if o.Trace != "" {
		// A scenario's --trace names a file in the learner's home on rank 0's node.
		o.Trace = filepath.Join(learnerHome(e.job, o.Hosts[0].Node), filepath.Base(o.Trace))
	}
	var buf bytes.Buffer
	mw := io.MultiWriter(out, &buf)
	l := &bench.Launcher{Starter: rankStarter{e}, Exe: "commlab", Stdout: mw, Stderr: mw, Env: env, Started: e.started}
	if err := l.Run(ctx, o); err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return 0, fmt.Errorf("%w: %v", session.ErrWorkloadFailed, err)
	}
	return nccl.AvgBusBW(buf.Bytes())
}

// rankStarter is the workload's bench.Starter: its node's agent runs each
// rank (`commlab bench rank`, as the learner, in the node's namespace), and
// the rank's output, its exit and rank 0's unique id (written on its fd 3)
// come back over the rank's stream.
type rankStarter struct{ e *Env }

var _ bench.Starter = rankStarter{}

// Start implements bench.Starter.
func (s rankStarter) Start(ctx context.Context, spec bench.Spec) (bench.Proc, error) {
	var fd3 *os.File
	if len(spec.ExtraFiles) > 0 {
		// The launcher closes its copy once Start returns, as after an exec.
		var err error
		if fd3, err = dupFile(spec.ExtraFiles[0]); err != nil {
			return nil, err
		}
	}
	c, err := s.e.hub.Stream(ctx, s.e.lab, spec.Node, Frame{Op: opRank, Env: spec.Env, UniqueID: fd3 != nil})
	if err != nil {
		if fd3 != nil {
			fd3.Close()
		}
		return nil, fmt.Errorf("start a rank on %s: %w", spec.Node, err)
	}
	r := &remoteRank{conn: c, done: make(chan struct{})}
	if fd3 != nil {
		c.fd3 = fd3
	}
	go r.pump(spec.Stdout, fd3)
	return r, nil
}

// remoteRank is a rank run by an agent (bench.Proc).
type remoteRank struct {
	conn *Conn
	done chan struct{} // closed once the rank's stream has ended
	err  error
}

func (r *remoteRank) pump(out io.Writer, fd3 *os.File) {
	defer close(r.done)
	_, _ = io.Copy(out, r.conn)
	if fd3 != nil {
		fd3.Close()
	}
	code, err := r.conn.Exit()
	switch {
	case err != nil:
		r.err = err
	case code != 0:
		r.err = fmt.Errorf("exit status %d", code)
	}
	r.conn.Close()
}

func (r *remoteRank) Wait() error { <-r.done; return r.err }
func (r *remoteRank) Kill() error { return r.conn.Close() }
func (r *remoteRank) Pid() int    { return r.conn.Pid() }

// Down implements session.Env: scancel, then wait until the job has left its
// nodes (the agents have reverted their faults; the epilog has swept).
func (e *Env) Down(ctx context.Context) error {
	e.once.Do(func() { close(e.done) })
	defer e.hub.Forget(e.lab)
	if e.job != "" {
		if err := cancel(ctx, e.job); err != nil {
			return err // the job may still hold its addresses
		}
	}
	e.freed.Do(e.free)
	return nil
}

func newLabID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
