package slurm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/commlab/commlab/labs/session"
)

// JobSpec is one lab's batch job.
type JobSpec struct {
	Lab       string   // the lab's id, in the job name commlab-<lab>
	Nodes     []string // the scenario's node names: one Slurm node each
	GPUs      int      // GPUs per node (--gres=<GRES>:N)
	Exclusive bool     // the lab touches host NICs: no other job on its nodes
	TTL       time.Duration
	Agent     string // commlab binary on the nodes
}

// Script is the sbatch script for s under c: every node runs one agent.
func (c *Config) Script(s JobSpec) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	opt := func(f string, a ...any) { fmt.Fprintf(&b, "#SBATCH "+f+"\n", a...) }
	opt("--job-name=commlab-%s", s.Lab)
	opt("--nodes=%d", len(s.Nodes))
	opt("--ntasks-per-node=1")
	opt("--time=%d", c.timeLimit(s.TTL))
	opt("--output=/dev/null")
	for _, f := range []struct{ flag, val string }{
		{"partition", c.Partition}, {"account", c.Account}, {"qos", c.QoS}, {"reservation", c.Reservation},
	} {
		if f.val != "" {
			opt("--%s=%s", f.flag, f.val)
		}
	}
	if s.GPUs > 0 {
		gres := c.GRES
		if gres == "" {
			gres = "gpu"
		}
		opt("--gres=%s:%d", gres, s.GPUs)
	}
	if s.Exclusive {
		opt("--exclusive")
	}
	// srun gets the batch step's environment, token included; argv stays clean.
	fmt.Fprintf(&b, "exec srun --kill-on-bad-exit=0 --ntasks-per-node=1 %s agent\n", shellQuote(s.Agent))
	return b.String()
}

// timeLimit is the job's --time in whole minutes: TTL plus grace, rounded up.
func (c *Config) timeLimit(ttl time.Duration) int {
	g := c.Grace
	if g == 0 {
		g = 2 * time.Minute
	}
	return int((ttl + g + time.Minute - 1) / time.Minute)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// submit runs sbatch with the script on stdin and env added to sbatch's own
// environment (which --export names, so the job gets those and SLURM_* only).
func submit(ctx context.Context, script string, env map[string]string) (string, error) {
	var names []string
	cmd := exec.CommandContext(ctx, "sbatch", "--parsable")
	cmd.Env = os.Environ()
	for k, v := range env {
		names = append(names, k)
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Args = append(cmd.Args, "--export="+strings.Join(append(names, "PATH"), ","))
	cmd.Stdin = strings.NewReader(script)
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("sbatch: %w%s", err, stderrOf(err))
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";") // "<id>;<cluster>" on federations
	if _, err := strconv.ParseUint(id, 10, 32); err != nil {
		return "", fmt.Errorf("sbatch printed %q, not a job id", out)
	}
	return id, nil
}

// QueueState is a job's line in squeue.
type QueueState struct {
	State  string // PENDING, RUNNING, COMPLETING...; "" once the job has left the queue
	Reason string // why it waits (Resources, Priority, ReqNodeNotAvail...) or "None"
	Nodes  string // the nodes it has, once running
	// Position is the job's place among its partition's pending jobs in
	// priority order (1: next), while it is pending; 0 when unknown.
	Position int
}

// Queue reads job's state from squeue.
func Queue(ctx context.Context, job string) (QueueState, error) {
	out, err := squeue(ctx, "--jobs="+job, "--format=%T|%r|%N|%P")
	if err != nil {
		// squeue fails with "Invalid job id specified" once the job is purged.
		if bytes.Contains(stderrBytes(err), []byte("Invalid job id")) {
			return QueueState{}, nil
		}
		return QueueState{}, err
	}
	line := strings.TrimSpace(out)
	if line == "" {
		return QueueState{}, nil
	}
	f := strings.SplitN(line, "|", 4)
	for len(f) < 4 {
		f = append(f, "")
	}
	q := QueueState{State: f[0], Reason: f[1], Nodes: f[2]}
	if q.State == "PENDING" && f[3] != "" {
		// Best effort: a failure leaves the position unknown.
		if ids, err := squeue(ctx, "--states=PENDING", "--partition="+f[3], "--sort=-p,i", "--format=%i"); err == nil {
			q.Position = position(ids, job)
		}
	}
	return q, nil
}

// position is job's 1-based line in ids (squeue's job ids, one a line), or 0.
func position(ids, job string) int {
	for i, id := range strings.Fields(ids) {
		if id == job {
			return i + 1
		}
	}
	return 0
}

func squeue(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "squeue", append([]string{"--noheader"}, args...)...).Output()
	if err != nil {
		return "", fmt.Errorf("squeue: %w%s", err, stderrOf(err))
	}
	return string(out), nil
}

// Gone says whether the job no longer holds nodes.
func (q QueueState) Gone() bool {
	switch q.State {
	case "", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE":
		return true
	}
	return false
}

// end is how a gone job ended, as far as squeue still knows.
func (q QueueState) end() string {
	if q.State == "" {
		return "no longer listed by squeue"
	}
	return q.State
}

// Waiting is the job's place in the queue for the lab page, nil unless pending.
func (q QueueState) Waiting() *session.Queue {
	if q.State != "PENDING" {
		return nil
	}
	return &session.Queue{Position: q.Position, Reason: q.Reason}
}

// String is the job's state for the lab's log.
func (q QueueState) String() string {
	if q.State == "PENDING" {
		if q.Position > 0 {
			return fmt.Sprintf("Slurm job pending (%s), position %d in the queue", q.Reason, q.Position)
		}
		return fmt.Sprintf("Slurm job pending (%s)", q.Reason)
	}
	if q.Nodes != "" {
		return fmt.Sprintf("Slurm job %s on %s", strings.ToLower(q.State), q.Nodes)
	}
	return "Slurm job " + strings.ToLower(q.State)
}

// cancel runs scancel and waits until the job has left its nodes (epilog done).
func cancel(ctx context.Context, job string) error {
	if out, err := exec.CommandContext(ctx, "scancel", job).CombinedOutput(); err != nil {
		return fmt.Errorf("scancel %s: %w: %s", job, err, bytes.TrimSpace(out))
	}
	for {
		q, err := Queue(ctx, job)
		if err == nil && q.Gone() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("job %s still %s after scancel: %w", job, q.State, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func stderrBytes(err error) []byte {
	if ee, ok := err.(*exec.ExitError); ok {
		return bytes.TrimSpace(ee.Stderr)
	}
	return nil
}

func stderrOf(err error) string {
	if b := stderrBytes(err); len(b) > 0 {
		return ": " + string(b)
	}
	return ""
}
