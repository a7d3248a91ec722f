//go:build linux

package netns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	clhost "github.com/commlab/commlab/internal/host"
	"github.com/commlab/commlab/internal/hostns"
	"github.com/commlab/commlab/labs"
	"github.com/commlab/commlab/labs/cgroup"
)

// nodePath is the PATH of processes on a node.
const nodePath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Exec prepares argv to run on node as root, in the node's network namespace
// and cgroup (its shell leaf, or its workload leaf if the command is marked
// Workload), with the node's name as hostname (its own UTS namespace). The
// environment starts clean (PATH, HOME=/root, LANG, HOSTNAME, COMMLAB_SANDBOX,
// COMMLAB_NODE): append to cmd.Env rather than inheriting commlab's. ctx kills
// the process when it ends, as with exec.CommandContext.
func (s *Sandbox) Exec(ctx context.Context, node string, argv ...string) (*labs.Cmd, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("exec: empty command")
	}
	_, info, g, err := s.nodeOf(node)
	if err != nil {
		return nil, err
	}
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Env = []string{nodePath, "HOME=/root", "LANG=C.UTF-8", "HOSTNAME=" + node,
		"COMMLAB_SANDBOX=" + s.ID(), "COMMLAB_NODE=" + node}
	c.Dir = "/"
	return labs.NewCmd(c, func(lc *labs.Cmd) error {
		if _, _, err := s.up(); err != nil {
			return err
		}
		sp := spawnSpec{netns: info.NetNSPath, mountNS: lc.MountNS, hostname: node, group: g, leaf: clhost.ShellLeaf}
		if lc.Workload {
			sp.leaf = clhost.WorkloadLeaf
		}
		if err := spawn(lc.Cmd, sp, lc.Cmd.Start); err != nil {
			return fmt.Errorf("exec %s on %s/%s: %w", argv[0], s.ID(), node, err)
		}
		return nil
	}), nil
}

// nodeOf returns the up sandbox's state, node's description and cgroup: what
// starting a process on node needs.
func (s *Sandbox) nodeOf(node string) (*State, NodeInfo, *cgroup.Group, error) {
	st, _, err := s.up()
	if err != nil {
		return nil, NodeInfo{}, nil, err
	}
	info, err := s.Node(node)
	if err != nil {
		return nil, NodeInfo{}, nil, err
	}
	g, err := cgroup.Open(info.Cgroup)
	if err != nil {
		return nil, NodeInfo{}, nil, err
	}
	return st, info, g, nil
}

// spawnSpec says where a process goes before it runs.
type spawnSpec struct {
	netns    string        // network namespace file to join
	mountNS  string        // mount namespace file to join first; "" keeps the host's
	hostname string        // if set, a new UTS namespace with this hostname
	hide     []string      // if learner: directories covered by an empty tmpfs
	binds    [][2]string   // if learner: bind mounts (source, target)
	roBinds  [][2]string   // if learner: read-only bind mounts (source, target; directories or files)
	scratch  [][2]string   // if learner: private writable tmpfs (path, size)
	learner  bool          // private mounts, fresh /sys, no_new_privs, tight bounding set
	group    *cgroup.Group // the node's cgroup (a learner sees it at /sys/fs/cgroup)
	leaf     string        // the leaf of group the process runs in: clhost.ShellLeaf or WorkloadLeaf
}

// spawn starts c (through start, which calls c.Start or a pty variant) on a
// throw-away OS thread that first enters the node: mount namespace, network
// namespace, UTS namespace, learner restrictions, cgroup. Nothing of this
// touches the calling thread or the host.
func spawn(c *exec.Cmd, sp spawnSpec, start func() error) error {
	if c.SysProcAttr == nil {
		c.SysProcAttr = &syscall.SysProcAttr{}
	}
	return hostns.OnFreshThread(func() error {
		// setns into a mount namespace needs an unshared fs context.
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			return fmt.Errorf("unshare fs: %w", err)
		}
		if sp.mountNS != "" {
			if err := setnsPath(sp.mountNS, unix.CLONE_NEWNS); err != nil {
				return err
			}
		}
		if err := setnsPath(sp.netns, unix.CLONE_NEWNET); err != nil {
			return err
		}
		if sp.hostname != "" {
			if err := unix.Unshare(unix.CLONE_NEWUTS); err != nil {
				return fmt.Errorf("unshare uts: %w", err)
			}
			if err := unix.Sethostname([]byte(sp.hostname)); err != nil {
				return fmt.Errorf("sethostname: %w", err)
			}
		}
		// Open the cgroup's files before the mounts change (a learner's /sys is the node's).
		leaf, err := sp.group.Sub(sp.leaf)
		if err != nil {
			return err
		}
		pl, err := leaf.Prepare(c.SysProcAttr)
		if err != nil {
			return err
		}
		defer pl.Close()
		if sp.learner {
			// The learner init (learnerinit.go) confines the program once it has
			// mounted the new PID namespace's /proc, which needs CAP_SYS_ADMIN, and
			// gets the node's user namespace as its file 3.
			if len(c.ExtraFiles) > 0 {
				return errors.New("a learner's program takes no extra files")
			}
			userNS, err := nodeUserNS(sp.netns)
			if err != nil {
				return err
			}
			defer userNS.Close()
			c.ExtraFiles = []*os.File{userNS}
			if err := learnerMounts(sp); err != nil {
				return err
			}
		}
		if err := start(); err != nil {
			return err
		}
		if err := pl.Place(c.Process.Pid); err != nil {
			_ = c.Wait()
			return err
		}
		return nil
	})
}

// nodeUserNS opens the user namespace that owns the node's network namespace at
// path. It refuses commlab's own (a node built by a commlab before nodes had one):
// a learner's capabilities would count in every namespace of the host.
func nodeUserNS(path string) (*os.File, error) {
	f, err := hostns.OwnerUserNS(path)
	if err != nil {
		return nil, err
	}
	var own, node unix.Stat_t
	if err := unix.Stat("/proc/self/ns/user", &own); err != nil {
		f.Close()
		return nil, fmt.Errorf("stat own user namespace: %w", err)
	}
	if err := unix.Fstat(int(f.Fd()), &node); err != nil || node.Dev == own.Dev && node.Ino == own.Ino {
		f.Close()
		return nil, fmt.Errorf("namespace %s has no user namespace of its own (built by an older commlab): take the lab down and up again", path)
	}
	return f, nil
}

func setnsPath(path string, kind int) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open namespace %s: %w", path, err)
	}
	defer unix.Close(fd)
	if err := unix.Setns(fd, kind); err != nil {
		return fmt.Errorf("enter namespace %s: %w", path, err)
	}
	return nil
}

// learnerMounts gives the thread (and so the shell) a private mount namespace
// in which the learner's home and tmp replace /home, /tmp and /var/tmp, the
// host's other world-writable directories (/dev/shm, /run/lock) are private
// and small (nothing the learner writes outlives the sandbox), commlab's own
// directories (namespaces, run-time files, data) are covered, and /sys is a
// fresh sysfs that shows the node's interfaces rather than the host's.
func learnerMounts(sp spawnSpec) error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	for _, b := range sp.binds {
		if !isDir(b[1]) {
			continue
		}
		if err := unix.Mount(b[0], b[1], "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s on %s: %w", b[0], b[1], err)
		}
	}
	for _, b := range sp.roBinds {
		if !sameKind(b[0], b[1]) {
			continue
		}
		if err := unix.Mount(b[0], b[1], "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s on %s: %w", b[0], b[1], err)
		}
		if err := unix.Mount("", b[1], "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
			return fmt.Errorf("make %s read-only: %w", b[1], err)
		}
	}
	for _, m := range sp.scratch {
		if !isDir(m[0]) {
			continue
		}
		if err := unix.Mount("tmpfs", m[0], "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,size="+m[1]); err != nil {
			return fmt.Errorf("mount a private %s: %w", m[0], err)
		}
	}
	for _, dir := range sp.hide {
		if !isDir(dir) {
			continue
		}
		// Detach what is mounted below first, or /proc/self/mountinfo would still
		// name it (other sandboxes' namespaces under /run/netns, say).
		if err := detachBelow(dir); err != nil {
			return err
		}
		if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,mode=0555"); err != nil {
			return fmt.Errorf("hide %s: %w", dir, err)
		}
	}
	// The node's own cgroup stays visible, read-only, where a container shows its
	// cgroup: /sys/fs/cgroup/<controller> (v1) or /sys/fs/cgroup (v2). Its limits and
	// counters (cpu.cfs_quota_us, cpu.stat nr_throttled, memory.*) are evidence. The
	// directories are opened before the node's /sys covers the host's.
	var views []cgroupView
	if sp.group != nil {
		for _, dir := range sp.group.Dirs() {
			fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				continue
			}
			defer unix.Close(fd)
			views = append(views, cgroupView{fd: fd, target: cgroupViewTarget(dir)})
		}
	}
	// The node's sysfs goes over the host's, which stays underneath, out of reach (no
	// CAP_SYS_ADMIN to unmount it), so the cgroup directories opened above can still be
	// bound from it.
	if err := unix.Mount("sysfs", "/sys", "sysfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount the node's /sys: %w", err)
	}
	return mountCgroupViews(views)
}

// detachBelow lazily unmounts every mount at or below dir in the calling thread's
// (private) mount namespace, deepest first.
func detachBelow(dir string) error {
	b, err := os.ReadFile("/proc/thread-self/mountinfo")
	if err != nil {
		return fmt.Errorf("read mountinfo: %w", err)
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		p := unescapeMountPath(f[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	for _, p := range points {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("detach %s: %w", p, err)
		}
	}
	return nil
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				out.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		out.WriteByte(s[i])
	}
	return out.String()
}

// asLearnerInit rewrites c, built for the learner's program, to start through the
// learner init (learnerinit.go): this binary as PID 1 of a new PID and IPC namespace,
// which runs the program as uid with learnerCaps in the node's user namespace. With
// setctty, c's stdin is a terminal that becomes the program's controlling terminal.
func asLearnerInit(c *exec.Cmd, uid uint32, setctty bool) error {
	li, err := NewLearnerInit(learnerInitArgv0, uid, c.Dir, setctty, append([]string{c.Path}, c.Args[1:]...))
	if err != nil {
		return err
	}
	c.Path, c.Args = "/proc/self/exe", li.Argv
	c.Env = append(slices.Clip(c.Env), li.Env)
	c.SysProcAttr = li.Attr
	return nil
}

// LearnerInit starts a learner's program on a node through the learner init
// (learnerinit.go), for a caller that enters the node's network namespace itself
// (the Slurm agent, through `ip netns exec`). The first process of the new PID
// and IPC namespaces that Attr makes must exec Argv, this commlab binary and its
// arguments, without forking, in the node's network namespace and a private
// mount namespace, with Env added to its environment and the user namespace that
// owns the node's network namespace (hostns.CreateConfined, hostns.OwnerUserNS)
// as its file 3.
type LearnerInit struct {
	Argv []string
	Env  string
	Attr *syscall.SysProcAttr
}

// NewLearnerInit is the learner init that runs argv in dir as uid (with setctty,
// its stdin is a terminal that becomes argv's controlling terminal); exe is how
// the init's command line names this binary.
func NewLearnerInit(exe string, uid uint32, dir string, setctty bool, argv []string) (LearnerInit, error) {
	if len(argv) == 0 || argv[0] == "" {
		return LearnerInit{}, errors.New("learner init: empty command")
	}
	spec, err := json.Marshal(learnerInitSpec{UID: uid, Dir: dir, Setctty: setctty})
	if err != nil {
		return LearnerInit{}, err
	}
	return LearnerInit{
		Argv: append([]string{exe}, argv...),
		Env:  learnerInitEnv + "=" + string(spec),
		Attr: &syscall.SysProcAttr{Setsid: true, Cloneflags: unix.CLONE_NEWPID | unix.CLONE_NEWIPC},
	}, nil
}

// cgroupView is a node cgroup directory (an O_PATH descriptor) and where a learner sees it.
type cgroupView struct {
	fd     int
	target string
}

// cgroupViewTarget maps /sys/fs/cgroup/<ctrl>/commlab/<id>/<node> to /sys/fs/cgroup/<ctrl>
// and the v2 /sys/fs/cgroup/commlab/<id>/<node> to /sys/fs/cgroup.
func cgroupViewTarget(dir string) string {
	rel := strings.TrimPrefix(dir, "/sys/fs/cgroup/")
	ctrl, _, _ := strings.Cut(rel, "/")
	if ctrl == cgroup.Root {
		return "/sys/fs/cgroup"
	}
	return filepath.Join("/sys/fs/cgroup", ctrl)
}

func mountCgroupViews(views []cgroupView) error {
	if len(views) == 0 {
		return nil
	}
	const base = "/sys/fs/cgroup"
	if views[0].target != base {
		if err := unix.Mount("tmpfs", base, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,mode=0755"); err != nil {
			return fmt.Errorf("mount %s: %w", base, err)
		}
	}
	for _, v := range views {
		if v.target != base {
			if err := os.Mkdir(v.target, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return fmt.Errorf("make %s: %w", v.target, err)
			}
		}
		src := fmt.Sprintf("/proc/self/fd/%d", v.fd)
		if err := unix.Mount(src, v.target, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("show the node's cgroup at %s: %w", v.target, err)
		}
		if err := unix.Mount("", v.target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("make %s read-only: %w", v.target, err)
		}
	}
	if views[0].target != base {
		if err := unix.Mount("", base, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,mode=0755"); err != nil {
			return fmt.Errorf("make %s read-only: %w", base, err)
		}
	}
	return nil
}

// sameKind reports whether src and dst both exist and are both directories or both
// regular files: what a bind mount of src on dst needs (/etc/hosts is a file).
func sameKind(src, dst string) bool {
	a, err1 := os.Stat(src)
	b, err2 := os.Stat(dst)
	if err1 != nil || err2 != nil {
		return false
	}
	return a.IsDir() && b.IsDir() || a.Mode().IsRegular() && b.Mode().IsRegular()
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// hiddenFromLearners lists what a learner shell must not see.
func hiddenFromLearners(dataDir string) []string {
	out := []string{netnsDir, "/run/commlab"}
	if d := filepath.Clean(dataDir); d != "/" && d != "." {
		out = append(out, d)
	}
	return out
}
