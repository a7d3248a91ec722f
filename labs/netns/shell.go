//go:build linux

package netns

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	clhost "github.com/commlab/commlab/internal/host"
	"github.com/commlab/commlab/labs"
	"github.com/commlab/commlab/labs/cgroup"
)

// ShellPath is the learner's login shell.
var ShellPath = "/bin/bash"

// Shell starts bash on node for the learner, on a new pseudo-terminal: a
// login shell (/etc/profile, then ~/.bash_profile, which sets PATH with the
// sbin directories and the prompt learner@<node>:~$), or, with opts.RC, an
// interactive shell whose rc file runs /etc/profile, that profile, then RC.
// The rc file is root's, in /home/.commlab, readable but not writable by the
// learner.
//
// The shell runs as the sandbox's learner uid with only CAP_NET_ADMIN and
// CAP_NET_RAW (ambient, and nothing else in its bounding set; no_new_privs),
// held in the node's user namespace (so they act on this node only), in the
// node's network namespace, in the node's cgroup (its shell leaf, above the
// lab's workload in CPU weight; the sandbox's pids limit contains a fork bomb), with the node's name as hostname (the prompt
// reads learner@node1:~$), in a new PID namespace with its own /proc (a learner
// lists only the lab's processes; kernel lookups by pid, such as `ip link set X
// netns 1`, reach only the shell's own) and a new IPC namespace, started by the
// learner init (learnerinit.go) as PID 1, and a private mount namespace
// (learnerSpec): /home/learner, /tmp and /var/tmp are the sandbox's, /dev/shm
// (unless opts.MountNS gives the workloads' view) and /run/lock are private, /sys
// shows the node's interfaces, and /run/netns, /run/commlab and the data
// directory are covered by empty read-only mounts. Closing the terminal, ctx
// ending, or the sandbox going down ends the shell and everything it started.
func (s *Sandbox) Shell(ctx context.Context, node string, opts labs.ShellOptions) (labs.Terminal, error) {
	st, info, g, err := s.nodeOf(node)
	if err != nil {
		return nil, err
	}
	if opts.Rows == 0 || opts.Cols == 0 {
		opts.Rows, opts.Cols = 24, 80
	}
	argv := []string{ShellPath, "--login"}
	if opts.RC != "" {
		rc, err := writeRC(sandboxRunDir(s.ID()), node, opts.RC)
		if err != nil {
			return nil, err
		}
		argv = []string{ShellPath, "--rcfile", rc, "-i"}
	}
	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("open pty: %w", err)
	}
	defer tty.Close()
	uid := int(st.LearnerUID)
	// Programs that reopen their terminal by name (e.g. less, ssh) need to own it.
	if err := os.Chown(tty.Name(), uid, uid); err != nil {
		ptmx.Close()
		return nil, fmt.Errorf("chown %s: %w", tty.Name(), err)
	}
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: opts.Rows, Cols: opts.Cols}); err != nil {
		ptmx.Close()
		return nil, fmt.Errorf("size pty: %w", err)
	}

	c := exec.Command(argv[0], argv[1:]...)
	c.Env = learnerEnv(s.ID(), node)
	c.Dir = "/home/learner"
	c.Stdin, c.Stdout, c.Stderr = tty, tty, tty
	if err := asLearnerInit(c, uint32(uid), true); err != nil {
		ptmx.Close()
		return nil, err
	}
	sp := learnerSpec(s.ID(), st.DataDir, info, g, opts.ReadOnlyBinds, opts.MountNS)
	if err := spawn(c, sp, c.Start); err != nil {
		ptmx.Close()
		return nil, fmt.Errorf("shell on %s/%s: %w", s.ID(), node, err)
	}
	t := &terminal{pty: ptmx, cmd: c, done: make(chan struct{})}
	go func() {
		t.waitErr = c.Wait()
		close(t.done)
	}()
	go func() {
		select {
		case <-ctx.Done():
			t.Close()
		case <-t.done:
		case <-s.done:
			t.Close()
		}
	}()
	return t, nil
}

// terminal is a learner shell on a pty; it implements labs.Terminal.
type terminal struct {
	pty     *os.File
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
	once    sync.Once
}

var _ labs.Terminal = (*terminal)(nil)

// Read returns terminal output; io.EOF once the shell is gone.
func (t *terminal) Read(p []byte) (int, error) {
	n, err := t.pty.Read(p)
	if err != nil && (errors.Is(err, syscall.EIO) || errors.Is(err, os.ErrClosed)) {
		// Linux reports a pty whose other side is closed as EIO.
		err = io.EOF
	}
	return n, err
}

// Write sends keystrokes.
func (t *terminal) Write(p []byte) (int, error) { return t.pty.Write(p) }

// Resize sets the terminal size (the shell gets SIGWINCH).
func (t *terminal) Resize(rows, cols uint16) error {
	return pty.Setsize(t.pty, &pty.Winsize{Rows: rows, Cols: cols})
}

// Wait returns once the shell has exited.
func (t *terminal) Wait() error {
	<-t.done
	return t.waitErr
}

// Close ends the shell: its init is PID 1 of its own PID namespace, so killing
// it kills everything the shell started. It waits up to 5 seconds for the shell to go.
func (t *terminal) Close() error {
	t.once.Do(func() {
		_ = t.cmd.Process.Kill()
		select {
		case <-t.done:
		case <-time.After(5 * time.Second):
		}
		t.pty.Close()
	})
	return nil
}

// writeRC stores a shell's rc file under the sandbox's /home/.commlab (root's,
// mode 0644) and returns its path as the shell sees it.
func writeRC(runDir, node, rc string) (string, error) {
	dir := filepath.Join(runDir, "home", ".commlab")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, node+"-*.rc")
	if err != nil {
		return "", fmt.Errorf("write shell rc: %w", err)
	}
	defer f.Close()
	if _, err := f.WriteString(labs.ShellRC(rc)); err != nil {
		return "", fmt.Errorf("write shell rc: %w", err)
	}
	if err := f.Chmod(0o644); err != nil {
		return "", err
	}
	return filepath.Join("/home/.commlab", filepath.Base(f.Name())), nil
}

// learnerSpec is how a learner's process enters a node: the node's namespaces and
// cgroup, the sandbox's /home and /tmp, private /run/lock and (unless mountNS gives a
// workload's view) /dev/shm, and commlab's own directories hidden.
func learnerSpec(id, dataDir string, info NodeInfo, g *cgroup.Group, roBinds [][2]string, mountNS string) spawnSpec {
	run := sandboxRunDir(id)
	sp := spawnSpec{
		netns: info.NetNSPath, hostname: info.Name, group: g, leaf: clhost.ShellLeaf, learner: true,
		binds: [][2]string{
			{filepath.Join(run, "home"), "/home"},
			{filepath.Join(run, "tmp"), "/tmp"},
			{filepath.Join(run, "tmp"), "/var/tmp"},
		},
		roBinds: roBinds,
		hide:    hiddenFromLearners(dataDir),
		scratch: [][2]string{{"/run/lock", "1m"}},
		mountNS: mountNS,
	}
	if mountNS == "" {
		// With a workload's mount namespace the learner must see its /dev/shm.
		sp.scratch = append(sp.scratch, [2]string{"/dev/shm", "64m"})
	}
	return sp
}

// LearnerExec prepares argv to run on node exactly as a program typed in the
// learner's shell runs (the learner's uid, capabilities, namespaces, mounts and
// cgroup), without a terminal: what the lab checks before it opens, e.g. that the
// GPU can be used from the learner's shell. The environment starts as the shell's.
func (s *Sandbox) LearnerExec(ctx context.Context, node string, argv ...string) (*labs.Cmd, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("exec: empty command")
	}
	st, info, g, err := s.nodeOf(node)
	if err != nil {
		return nil, err
	}
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Env = learnerEnv(s.ID(), node)
	c.Dir = "/home/learner"
	return labs.NewCmd(c, func(lc *labs.Cmd) error {
		if err := asLearnerInit(lc.Cmd, st.LearnerUID, false); err != nil {
			return err
		}
		sp := learnerSpec(s.ID(), st.DataDir, info, g, nil, lc.MountNS)
		if err := spawn(lc.Cmd, sp, lc.Cmd.Start); err != nil {
			return fmt.Errorf("exec %s as the learner on %s/%s: %w", argv[0], s.ID(), node, err)
		}
		return nil
	}), nil
}

// learnerEnv is the environment a learner's programs start with.
func learnerEnv(id, node string) []string {
	return []string{
		nodePath, "HOME=/home/learner", "USER=learner", "LOGNAME=learner", "SHELL=" + ShellPath,
		"TERM=xterm-256color", "LANG=C.UTF-8", "COMMLAB_SANDBOX=" + id, "COMMLAB_NODE=" + node,
	}
}

// LearnerHome is where the learner's home (/home/learner in their shells) lies in
// the host's mount namespace, where workloads run: a workload writes a file for the
// learner there (the directory is the learner's, so write through a new file renamed
// into place, never by following a name the learner controls).
func (s *Sandbox) LearnerHome() string {
	return filepath.Join(sandboxRunDir(s.ID()), "home", "learner")
}

// OpenLearnerFile opens (creating or appending to) a file in the learner's
// home, e.g. a workload's log the learner is expected to read. The file
// belongs to the learner. name is a plain file name; the open never follows a
// symlink the learner may have planted, and refuses anything but a regular file.
func (s *Sandbox) OpenLearnerFile(name string) (*os.File, error) {
	st, _, err := s.up()
	if err != nil {
		return nil, err
	}
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") || len(name) > 255 {
		return nil, fmt.Errorf("learner file %q: want a plain file name", name)
	}
	p := filepath.Join(s.LearnerHome(), name)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open learner file %s: %w", name, err)
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("open learner file %s: not a regular file", name)
	}
	uid := int(st.LearnerUID)
	if err := f.Chown(uid, uid); err != nil {
		f.Close()
		return nil, fmt.Errorf("chown learner file %s: %w", name, err)
	}
	return f, nil
}
