//go:build linux

package slurm

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/commlab/commlab/internal/host"
	"github.com/commlab/commlab/internal/hostns"
	"github.com/commlab/commlab/labs/netns"
)

// createNodeNS creates the node's network namespace, owned by a user namespace
// of its own, as the local backend's nodes are: the learner's CAP_NET_ADMIN
// then counts in this namespace only, never in the Slurm node's own or another
// lab's (a move by pid, namespace file or namespace id is refused).
func createNodeNS(name string) error {
	h, ns, err := hostns.CreateConfined(name)
	if err != nil {
		return err
	}
	h.Close()
	return ns.Close()
}

// learnerInit is argv started in the node's sandbox (inNode) through the local
// backend's learner init (netns.LearnerInit): ip netns exec and the profile.d
// bind exec it as PID 1 of new PID and IPC namespaces, and it runs argv in the
// user namespace that owns the node's network namespace, as LearnerUID with
// CAP_NET_ADMIN and CAP_NET_RAW only and no_new_privs. With setctty, the
// command's stdin is a terminal that becomes argv's controlling terminal. The
// caller closes the returned file (the user namespace) once the command has
// started.
func (a *Agent) learnerInit(setctty bool, argv ...string) (*exec.Cmd, *os.File, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	li, err := netns.NewLearnerInit(exe, LearnerUID, a.home(), setctty, argv)
	if err != nil {
		return nil, nil, err
	}
	userNS, err := hostns.OwnerUserNS(filepath.Join(host.NetNSDir, a.netns()))
	if err != nil {
		return nil, nil, err
	}
	cmd := a.asLearner(a.inNode(context.Background(), li.Argv...))
	cmd.Env = append(cmd.Env, li.Env)
	cmd.SysProcAttr = li.Attr
	cmd.ExtraFiles = []*os.File{userNS}
	return cmd, userNS, nil
}
