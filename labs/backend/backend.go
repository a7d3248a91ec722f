// Package backend assembles the real parts a lab session (labs/session) runs on:
// network-namespace sandboxes (labs/netns), the collective benchmark running in their
// nodes (bench), and the journaled fault injector (injector).
package backend

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/commlab/commlab/bench"
	"github.com/commlab/commlab/injector"
	"github.com/commlab/commlab/labs"
	"github.com/commlab/commlab/labs/netns"
	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/labs/topology"
)

// Netns brings labs up as network-namespace sandboxes.
type Netns struct {
	DataDir string
	Exe     string // the commlab binary: ranks run "commlab bench rank"
	Log     *slog.Logger
}

var _ session.Provider = Netns{}

// Up implements session.Provider.
func (p Netns) Up(ctx context.Context, topo string, ttl time.Duration, progress func(string)) (session.Env, error) {
	t, err := topology.Load(topo)
	if err != nil {
		return nil, err
	}
	sb, err := netns.New(t, netns.Options{DataDir: p.DataDir, TTL: ttl, Logger: p.Log})
	if err != nil {
		return nil, err
	}
	progress(fmt.Sprintf("创建虚拟集群 %s（%s，%d 台节点）", sb.ID(), t.Name, len(t.Nodes)))
	if err := sb.Up(ctx); err != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = sb.Down(dctx)
		return nil, err
	}
	return &netnsEnv{sb: sb, exe: p.Exe}, nil
}

// netnsEnv is a sandbox seen by a lab.
type netnsEnv struct {
	sb  *netns.Sandbox
	exe string
}

var _ session.Env = (*netnsEnv)(nil)

func (e *netnsEnv) ID() string      { return e.sb.ID() }
func (e *netnsEnv) Nodes() []string { return e.sb.Topology().NodeNames() }

func (e *netnsEnv) Target(node string) injector.Target {
	t := injector.Target{Sandbox: e.sb.ID(), Node: node}
	if info, err := e.sb.Node(node); err == nil {
		t.NetNS, t.Cgroup = info.NetNS, info.Cgroup
	}
	return t
}

func (e *netnsEnv) Shell(ctx context.Context, node, rc string) (session.PTY, error) {
	// The commlab binary is on the learner's PATH (commlab bench in a node shell), and
	// the node's /etc/profile.d, where env-force hides variables, is where a login
	// shell reads it.
	rc += fmt.Sprintf("export PATH=\"$PATH:%s\"\n", filepath.Dir(e.exe))
	opts := labs.ShellOptions{Rows: 32, Cols: 120, RC: rc}
	if etc := e.Target(node).NodeEtc(); etc != "" {
		opts.ReadOnlyBinds = append(opts.ReadOnlyBinds, [2]string{filepath.Join(etc, "profile.d"), "/etc/profile.d"})
	}
	return e.sb.Shell(ctx, node, opts)
}

// Workload runs commlab bench over the sandbox's nodes. Each rank gets the job's
// environment, then whatever env-force faults hide on its node, as on a real cluster
// where a profile script overrides the job script.
func (e *netnsEnv) Workload(ctx context.Context, hosts string, argv, env []string, out io.Writer) error {
	o, _, err := bench.ParseArgs(append(append([]string(nil), argv...), "--hosts", hosts))
	if err != nil {
		return err
	}
	logf, err := e.sb.OpenLearnerFile("train.log")
	if err != nil {
		return err
	}
	defer logf.Close()
	w := io.MultiWriter(out, logf)
	fmt.Fprintf(logf, "==> %s commlab bench %s --hosts %s\n", time.Now().Format(time.RFC3339), strings.Join(argv, " "), hosts)
	l := &bench.Launcher{Starter: sandboxStarter{env: e}, Exe: e.exe, Stdout: w, Stderr: w, Env: env}
	return l.Run(ctx, o)
}

func (e *netnsEnv) Down(ctx context.Context) error { return e.sb.Down(ctx) }

// sandboxStarter starts ranks with the sandbox's Exec: in the node's namespaces and
// cgroup (so cpu-squeeze and mem-pressure reach them).
type sandboxStarter struct{ env *netnsEnv }

var _ bench.Starter = sandboxStarter{}

func (s sandboxStarter) Start(ctx context.Context, spec bench.Spec) (bench.Proc, error) {
	cmd, err := s.env.sb.Exec(ctx, spec.Node, spec.Argv...)
	if err != nil {
		return nil, err
	}
	forced, err := injector.EnvFor(s.env.Target(spec.Node))
	if err != nil {
		return nil, err
	}
	cmd.Env = append(append(cmd.Env, spec.Env...), forced...)
	cmd.Stdout, cmd.Stderr, cmd.ExtraFiles = spec.Stdout, spec.Stderr, spec.ExtraFiles
	if ns, ok := injector.ShmNamespace(s.env.Target(spec.Node)); ok {
		cmd.MountNS = ns
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return labProc{cmd}, nil
}

type labProc struct{ cmd *labs.Cmd }

func (p labProc) Wait() error { return p.cmd.Wait() }
func (p labProc) Kill() error { return p.cmd.Process.Kill() }
func (p labProc) Pid() int    { return p.cmd.Process.Pid }

// Faults lets labs apply and revert faults through the journaled injector.
type Faults struct{ In *injector.Injector }

var _ session.Faults = Faults{}

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

// OpenInjector opens the journaled injector with every built-in fault kind.
func OpenInjector(dataDir string, log *slog.Logger) (*injector.Injector, error) {
	reg, err := injector.NewRegistry(injector.Builtin()...)
	if err != nil {
		return nil, err
	}
	return injector.Open(injector.Options{DataDir: dataDir, Registry: reg, Logger: log})
}
