package backend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/commlab/commlab/bench"
	"github.com/commlab/commlab/injector"
	"github.com/commlab/commlab/labs"
	"github.com/commlab/commlab/labs/netns"
	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/nccl"
	"github.com/commlab/commlab/scenarios"
	"golang.org/x/sys/unix"
)

// netnsEnv is a sandbox seen by a lab.
type netnsEnv struct {
	sb  *netns.Sandbox
	exe string
}

var (
	_ session.Env         = (*netnsEnv)(nil)
	_ session.Renewer     = (*netnsEnv)(nil)
	_ session.Prioritizer = (*netnsEnv)(nil)
)

func (e *netnsEnv) ID() string      { return e.sb.ID() }
func (e *netnsEnv) Nodes() []string { return e.sb.Topology().NodeNames() }

// Prioritize implements session.Prioritizer with the sandbox's CPU weight.
func (e *netnsEnv) Prioritize() (restore func() error, err error) { return e.sb.Prioritize() }

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
	opts := labs.ShellOptions{Rows: 32, Cols: 120, RC: labs.OnPath(filepath.Dir(e.exe)) + rc}
	// Node names resolve as on a cluster: ping node2.
	opts.ReadOnlyBinds = append(opts.ReadOnlyBinds, [2]string{netns.HostsPath(e.sb.ID()), "/etc/hosts"})
	if etc := e.Target(node).NodeEtc(); etc != "" {
		opts.ReadOnlyBinds = append(opts.ReadOnlyBinds, labs.ProfileD(etc))
	}
	return e.sb.Shell(ctx, node, opts)
}

// Workload runs commlab bench over the sandbox's nodes (w.Hosts, default one rank on
// every node) and returns its average bus bandwidth. Each rank gets the job's
// environment, then whatever env-force faults hide on its node, as on a real cluster
// where a profile script overrides the job script. The output also goes to the
// learner's ~/train.log.
func (e *netnsEnv) Workload(ctx context.Context, w *scenarios.Workload, env []string, out io.Writer) (float64, error) {
	hosts := strings.Join(w.Hosts, ",")
	if hosts == "" {
		var hs []string
		for _, n := range e.Nodes() {
			hs = append(hs, n+":1")
		}
		hosts = strings.Join(hs, ",")
	}
	o, _, err := bench.ParseArgs(append(append([]string(nil), w.Bench...), "--hosts", hosts))
	if err != nil {
		return 0, err
	}
	if o.Trace != "" {
		// A scenario's --trace names a file in the learner's home, next to train.log.
		o.Trace = filepath.Join(e.sb.LearnerHome(), filepath.Base(o.Trace))
	}
	logf, err := e.sb.OpenLearnerFile("train.log")
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	var buf bytes.Buffer
	mw := io.MultiWriter(out, logf, &buf)
	fmt.Fprintf(logf, "==> %s commlab bench %s --hosts %s\n", time.Now().Format(time.RFC3339), strings.Join(w.Bench, " "), hosts)
	mine, err := e.learnerJobEnv()
	if err != nil {
		fmt.Fprintf(logf, "%v\n", err)
		return 0, fmt.Errorf("%w: %v", session.ErrWorkloadFailed, err)
	}
	env = append(append([]string(nil), env...), mine...) // the learner's lines win over the job's
	l := &bench.Launcher{Starter: sandboxStarter{env: e}, Exe: e.exe, Stdout: mw, Stderr: mw, Env: env}
	if err := l.Run(ctx, o); err != nil {
		return 0, fmt.Errorf("%w: %v", session.ErrWorkloadFailed, err)
	}
	return nccl.AvgBusBW(buf.Bytes())
}

// learnerJobEnv reads the learner's ~/job.env (absent: nothing), read before every
// run so an edit takes effect at the next one.
func (e *netnsEnv) learnerJobEnv() ([]string, error) {
	data, err := e.LearnerFile("job.env", 64<<10)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return session.ParseJobEnv("~/job.env", data)
}

var _ session.LearnerFiles = (*netnsEnv)(nil)

// LearnerFile implements session.LearnerFiles: the file is the learner's, so it is
// opened without following a link (nor blocking on a FIFO), must be a regular file
// and may hold at most max bytes.
func (e *netnsEnv) LearnerFile(name string, max int64) ([]byte, error) {
	f, err := os.OpenFile(filepath.Join(e.sb.LearnerHome(), name), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("~/%s: %w", name, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("~/%s: not a regular file", name)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("~/%s: %w", name, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("~/%s: larger than %d KiB", name, max>>10)
	}
	return data, nil
}

func (e *netnsEnv) Down(ctx context.Context) error { return e.sb.Down(ctx) }

// Renew implements session.Renewer: the sandbox's expiry moves to now+ttl.
func (e *netnsEnv) Renew(_ context.Context, _ string, ttl time.Duration) error {
	_, err := e.sb.Renew(ttl)
	return err
}

// sandboxStarter starts ranks with the sandbox's Exec: in the node's namespaces and
// cgroup (so cpu-squeeze and mem-pressure reach them), as its workload (below the
// learner's shells in CPU weight).
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
	cmd.Workload = true
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
