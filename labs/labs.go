// Package labs defines what a lab environment is to the rest of commlab: a
// cluster that comes up for one lab session and goes away after it, in which
// commands run on named nodes and learners get terminals. Backends implement
// [Environment]: labs/netns (network namespaces on one Linux host, the
// default), and later a real GPU node and Slurm clusters.
//
// An environment says up front what it can do ([Capabilities]) so that a lab
// that needs more (netem, GPUs, 4 rails) is refused before anything starts.
package labs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
)

// Environment is one lab cluster owned by one lab session.
//
// Up builds it; Down removes everything Up created and is safe to call more
// than once, after a failed Up, and concurrently with Exec. Exec and Shell
// need a node name from the topology.
type Environment interface {
	Up(ctx context.Context) error
	Down(ctx context.Context) error
	// Exec prepares argv to run on node; nothing runs until Start/Run.
	Exec(ctx context.Context, node string, argv ...string) (*Cmd, error)
	// Shell starts an interactive shell on node for the learner.
	Shell(ctx context.Context, node string, opts ShellOptions) (Terminal, error)
	Capabilities() Capabilities
}

// Errors shared by the backends; test them with errors.Is.
var (
	// ErrUnknownNode marks a node name the topology does not have.
	ErrUnknownNode = errors.New("unknown node")
	// ErrNotUp marks a call that needs the environment up.
	ErrNotUp = errors.New("environment is not up")
	// ErrUnsupported marks something this backend or host cannot do.
	ErrUnsupported = errors.New("not supported by this environment")
	// ErrNeedsLinux is what every lab, fault and GPU entry point returns on a
	// build for another OS, where the course, quizzes and content tools work but
	// nothing that touches the host does.
	ErrNeedsLinux = fmt.Errorf("labs need Linux: network namespaces, tc, nftables, cgroups (%w)", ErrUnsupported)
)

// ShellOptions configure a learner shell; the zero value gives a 24x80 login shell.
type ShellOptions struct {
	// Rows and Cols are the terminal's size; zero means 24x80.
	Rows, Cols uint16
	// RC, if set, is bash code the shell runs at start-up after the
	// environment's own profile (prompt, recording hooks). The learner can
	// read it but not change it.
	RC string
	// ReadOnlyBinds show host directories or files inside the shell, read-only,
	// over existing ones of the same kind: {source, target}. Labs use it to put a
	// node's /etc/profile.d (where a fault may hide variables) and the sandbox's
	// hosts file (/etc/hosts) where a learner looks.
	ReadOnlyBinds [][2]string
	// MountNS, if set, is a mount namespace file the shell starts from, so
	// the learner sees what the node's workloads see (e.g. a private /dev/shm
	// kept by the injector).
	MountNS string
}

// Terminal is a learner's shell: Read returns what the terminal shows, Write
// sends keystrokes. Close ends the shell and everything it started; Wait
// returns when the shell has exited. Wrap Read with io.TeeReader to record.
type Terminal interface {
	io.ReadWriteCloser
	Resize(rows, cols uint16) error
	Wait() error
}

// Capabilities say what an environment offers.
type Capabilities struct {
	// Backend names the implementation: "netns", "gpu", "slurm".
	Backend string `json:"backend"`
	// Nodes lists the node names.
	Nodes []string `json:"nodes"`
	// Rails is the number of data switches (rails) in the fabric.
	Rails int `json:"rails"`
	// GPUs is the number of GPUs per node (0 on netns).
	GPUs int `json:"gpus"`
	// RDMA says whether nodes have verbs devices (real or soft-RoCE).
	RDMA bool `json:"rdma"`
	// IntraNodeFabric says whether traffic inside a node is shaped ("NVLink").
	IntraNodeFabric bool `json:"intra_node_fabric"`
	// Shaping says whether link rates are enforced (tbf/htb present).
	Shaping bool `json:"shaping"`
	// Netem says whether sch_netem is available (delay and jitter; corruption also
	// works without it, through a tc BPF program).
	Netem bool `json:"netem"`
	// NFTables says whether nftables works inside the nodes (loss, port blocks).
	NFTables bool `json:"nftables"`
	// Shell says whether learners can get a terminal on a node.
	Shell bool `json:"shell"`
}

// Need is what a lab requires of its environment; zero fields require nothing.
type Need struct {
	Nodes           int  `json:"nodes,omitempty"`
	Rails           int  `json:"rails,omitempty"`
	GPUs            int  `json:"gpus,omitempty"`
	RDMA            bool `json:"rdma,omitempty"`
	IntraNodeFabric bool `json:"intra_node_fabric,omitempty"`
	Netem           bool `json:"netem,omitempty"`
	NFTables        bool `json:"nftables,omitempty"`
	Shell           bool `json:"shell,omitempty"`
}

// Check returns an error listing everything n needs that c lacks, wrapping
// [ErrUnsupported], or nil.
func (c Capabilities) Check(n Need) error {
	var miss []string
	if len(c.Nodes) < n.Nodes {
		miss = append(miss, fmt.Sprintf("%d nodes (have %d)", n.Nodes, len(c.Nodes)))
	}
	if c.Rails < n.Rails {
		miss = append(miss, fmt.Sprintf("%d rails (have %d)", n.Rails, c.Rails))
	}
	if c.GPUs < n.GPUs {
		miss = append(miss, fmt.Sprintf("%d GPUs per node (have %d)", n.GPUs, c.GPUs))
	}
	for _, f := range []struct {
		need, have bool
		what       string
	}{
		{n.RDMA, c.RDMA, "RDMA devices"},
		{n.IntraNodeFabric, c.IntraNodeFabric, "an intra-node fabric"},
		{n.Netem, c.Netem, "sch_netem (delay/jitter)"},
		{n.NFTables, c.NFTables, "nftables"},
		{n.Shell, c.Shell, "learner shells"},
	} {
		if f.need && !f.have {
			miss = append(miss, f.what)
		}
	}
	if len(miss) == 0 {
		return nil
	}
	return fmt.Errorf("%w: the %s environment lacks %s", ErrUnsupported, c.Backend, strings.Join(miss, ", "))
}

// Cmd is a command prepared to run on a lab node. Configure the embedded
// exec.Cmd (Stdout, Stderr, Stdin, Env, Dir) before starting it, then use
// Cmd's own Start, Run, Output or CombinedOutput: they put the process into
// the node (its namespaces and cgroup) before it runs. Calling the embedded
// exec.Cmd's Start directly would run it on the host, so don't.
type Cmd struct {
	*exec.Cmd
	// MountNS, if set, is a mount namespace file the process enters first
	// (e.g. a node's private /dev/shm kept by the injector).
	MountNS string

	start func(*Cmd) error
}

// NewCmd wraps c for a backend; start must start c.Cmd inside the node.
func NewCmd(c *exec.Cmd, start func(*Cmd) error) *Cmd {
	return &Cmd{Cmd: c, start: start}
}

// Start starts the command inside its node without waiting for it.
func (c *Cmd) Start() error {
	if c.start == nil {
		return errors.New("labs.Cmd: not created by an environment")
	}
	if c.Process != nil {
		return errors.New("labs.Cmd: already started")
	}
	return c.start(c)
}

// Run starts the command and waits for it.
func (c *Cmd) Run() error {
	if err := c.Start(); err != nil {
		return err
	}
	return c.Wait()
}

// Output runs the command and returns its standard output; on failure the
// *exec.ExitError carries the standard error, as with exec.Cmd.Output.
func (c *Cmd) Output() ([]byte, error) {
	if c.Stdout != nil {
		return nil, errors.New("labs.Cmd: Stdout already set")
	}
	var out, errb bytes.Buffer
	c.Stdout = &out
	captureErr := c.Stderr == nil
	if captureErr {
		c.Stderr = &errb
	}
	err := c.Run()
	var ee *exec.ExitError
	if err != nil && captureErr && errors.As(err, &ee) {
		ee.Stderr = errb.Bytes()
	}
	return out.Bytes(), err
}

// CombinedOutput runs the command and returns its standard output and error.
func (c *Cmd) CombinedOutput() ([]byte, error) {
	if c.Stdout != nil || c.Stderr != nil {
		return nil, errors.New("labs.Cmd: Stdout or Stderr already set")
	}
	var b bytes.Buffer
	c.Stdout = &b
	c.Stderr = &b
	err := c.Run()
	return b.Bytes(), err
}
