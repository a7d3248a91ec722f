// Package labs holds what commlab's lab backends share: their errors, the
// command ([Cmd]) and learner shell ([ShellOptions], [Terminal]) of a node.
//
// The interface a lab runs on is session.Env (labs/session), "a running lab
// environment", brought up by a session.Provider: labs/backend on this host
// (network namespaces from labs/netns, or a GPU node) and labs/slurm on a
// cluster. A Provider's Check refuses a lab the host cannot run before
// anything starts.
package labs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
)

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
	// Workload marks the lab's own workload (the ranks its chart and grading
	// measure): a backend that can runs it below the node's shells in CPU weight,
	// so that it does not starve them.
	Workload bool

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
