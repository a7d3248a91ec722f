//go:build linux

package hostns

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/commlab/commlab/internal/host"
)

// OnFreshThread runs fn on an OS thread of its own that is thrown away
// afterwards, so fn may change the thread's namespaces (setns, unshare)
// without them leaking to other goroutines. The main thread is never used:
// it cannot be thrown away, and the process's /proc/<pid>/ns files show it.
func OnFreshThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// Keep the main thread busy so the retry lands on another one.
			errc <- OnFreshThread(fn)
			runtime.UnlockOSThread()
			return
		}
		// No UnlockOSThread: the runtime ends this thread with the goroutine.
		errc <- fn()
	}()
	return <-errc
}

var netnsDirOnce sync.Once

// prepareNetnsDir makes /run/netns a shared mount point as iproute2 does, so
// namespaces bound there later appear in other mount namespaces too.
func prepareNetnsDir() error {
	var err error
	netnsDirOnce.Do(func() {
		dir := host.NetNSDir
		if err = os.MkdirAll(dir, 0o755); err != nil {
			return
		}
		if unix.Mount("", dir, "none", unix.MS_SHARED|unix.MS_REC, "") == nil {
			return
		}
		// Not a mount point yet: bind it onto itself first (what `ip netns add` does).
		if err = unix.Mount(dir, dir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			err = fmt.Errorf("bind %s: %w", dir, err)
			return
		}
		if err = unix.Mount("", dir, "none", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
			err = fmt.Errorf("make %s shared: %w", dir, err)
		}
	})
	return err
}

// sysctls are written in every namespace right after creation. IPv6 is off so
// no router solicitations or DAD probes add traffic that learners would have
// to explain; forwarding stays off (nodes are hosts).
var sysctls = map[string]string{
	"net/ipv6/conf/all/disable_ipv6":     "1",
	"net/ipv6/conf/default/disable_ipv6": "1",
	"net/ipv4/ip_forward":                "0",
}

// Create creates the named network namespace (a name commlab owns, see
// host.ValidOwnedNetNS) in the host's user namespace and returns a netlink
// handle and an open file for it. The namespace is created on a throw-away
// thread (unshare), bound at /run/netns/<name> like `ip netns add`, and given
// the sysctls above. On error nothing is left behind.
func Create(name string) (*netlink.Handle, vnetns.NsHandle, error) {
	return create(name, bindUnshared)
}

// CreateConfined creates the named network namespace as Create does, but owned
// by a user namespace of its own (every uid and gid mapped to itself). A
// capability counts in a network namespace only if it is held in the user
// namespace that owns it or an ancestor: a process confined to this user
// namespace (a learner's shell, see labs/netns) holds CAP_NET_ADMIN here and
// nowhere else, so the kernel refuses it any other namespace it could name by
// a netlink namespace id (IFLA_TARGET_NETNSID: EACCES). commlab, root in the
// parent user namespace, keeps every capability here. The user namespace
// lives as long as the network namespace (the kernel gives it back from the
// namespace file: NS_GET_USERNS). One thing the kernel refuses here even to
// host root: an nftables payload write (`ether daddr set`, `ip ttl set`:
// EPERM, seen on 6.18); the injector rewrites frames with tc BPF instead.
func CreateConfined(name string) (*netlink.Handle, vnetns.NsHandle, error) {
	return create(name, bindInOwnUserNS)
}

// create reserves /run/netns/<name>, lets bind put a new network namespace there
// and configures it.
func create(name string, bind func(path string) error) (*netlink.Handle, vnetns.NsHandle, error) {
	if err := host.ValidOwnedNetNS(name); err != nil {
		return nil, vnetns.None(), err
	}
	if err := prepareNetnsDir(); err != nil {
		return nil, vnetns.None(), err
	}
	path := filepath.Join(host.NetNSDir, name)
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return nil, vnetns.None(), fmt.Errorf("create netns %s: %w", name, err)
	}
	f.Close()
	h, ns, err := configure(path, bind)
	if err != nil {
		_ = Delete(name)
		return nil, vnetns.None(), fmt.Errorf("create netns %s: %w", name, err)
	}
	return h, ns, nil
}

// configure binds a new namespace at path, then, from a thread in it, writes the
// sysctls and opens a netlink handle and the namespace.
func configure(path string, bind func(path string) error) (*netlink.Handle, vnetns.NsHandle, error) {
	if err := bind(path); err != nil {
		return nil, vnetns.None(), err
	}
	var h *netlink.Handle
	var ns vnetns.NsHandle
	err := OnFreshThread(func() error {
		var err error
		if ns, err = vnetns.GetFromPath(path); err != nil {
			return fmt.Errorf("open namespace: %w", err)
		}
		if err := vnetns.Set(ns); err != nil {
			ns.Close()
			return fmt.Errorf("enter namespace: %w", err)
		}
		for k, v := range sysctls {
			// /proc/sys/net shows the namespace of the thread that opens it.
			if err := os.WriteFile("/proc/sys/"+k, []byte(v), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
				ns.Close()
				return fmt.Errorf("sysctl %s: %w", k, err)
			}
		}
		// Sockets belong to the namespace they were opened in, so this handle
		// keeps working from any thread.
		if h, err = netlink.NewHandle(); err != nil {
			ns.Close()
			return fmt.Errorf("netlink: %w", err)
		}
		return nil
	})
	return h, ns, err
}

// bindUnshared binds a new network namespace, unshared by a throw-away thread, at path.
func bindUnshared(path string) error {
	return OnFreshThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare: %w", err)
		}
		if err := unix.Mount("/proc/thread-self/ns/net", path, "none", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind namespace: %w", err)
		}
		return nil
	})
}

// identity maps every id of a new user namespace to the same id outside it, so that
// files and processes show their usual owners inside.
var identity = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1<<32 - 1}}

// bindInOwnUserNS binds at path a network namespace created inside a new user
// namespace. A multi-threaded process can neither enter nor create a user
// namespace (unshare and setns refuse), and a network namespace is owned by the
// user namespace of the process that creates it, so a holder process is cloned
// into both and its network namespace bound before it is let go. The holder is
// cat (coreutils), reading a pipe until commlab closes it: a re-exec of commlab
// would cost 30 ms and 60 MB of package initialisation per node.
func bindInOwnUserNS(path string) error {
	cat, err := exec.LookPath("cat")
	if err != nil {
		return fmt.Errorf("create a user namespace: %w", err)
	}
	c := exec.Command(cat)
	hold, err := c.StdinPipe()
	if err != nil {
		return err
	}
	c.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  unix.CLONE_NEWUSER | unix.CLONE_NEWNET,
		UidMappings: identity, GidMappings: identity,
		// Learners' shells clear their supplementary groups on the way in.
		GidMappingsEnableSetgroups: true,
	}
	err = c.Start()
	if errors.Is(err, unix.ENOSPC) {
		return fmt.Errorf("create a user namespace: %w (the limit is sysctl user.max_user_namespaces; 0 turns them off, and labs need them)", err)
	}
	if err != nil {
		return fmt.Errorf("create a user namespace: %w", err)
	}
	defer func() {
		hold.Close()
		_ = c.Wait()
	}()
	if err := unix.Mount(fmt.Sprintf("/proc/%d/ns/net", c.Process.Pid), path, "none", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind namespace: %w", err)
	}
	return nil
}

// OwnerUserNS opens the user namespace that owns the network namespace bound at
// path (for setns, or to pass to nsenter).
func OwnerUserNS(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open namespace %s: %w", path, err)
	}
	defer unix.Close(fd)
	u, err := unix.IoctlRetInt(fd, unix.NS_GET_USERNS)
	if err != nil {
		return nil, fmt.Errorf("owner of namespace %s: %w", path, err)
	}
	return os.NewFile(uintptr(u), "userns of "+path), nil
}

// Delete unbinds and removes /run/netns/<name> (a name commlab owns); a
// missing one is not an error. The kernel frees the namespace (and its links)
// once no process or open file holds it.
func Delete(name string) error {
	if err := host.ValidOwnedNetNS(name); err != nil {
		return err
	}
	path := filepath.Join(host.NetNSDir, name)
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount netns %s: %w", name, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove netns %s: %w", name, err)
	}
	return nil
}

// SetUp brings the link name up through h (a namespace's netlink handle).
func SetUp(h *netlink.Handle, name string) error {
	l, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("find %s: %w", name, err)
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("set %s up: %w", name, err)
	}
	return nil
}
