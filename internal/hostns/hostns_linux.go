//go:build linux

package hostns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"

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
// host.ValidOwnedNetNS) and returns a netlink handle and an open file for it.
// The namespace is created on a throw-away thread (unshare), bound at
// /run/netns/<name> like `ip netns add`, and given the sysctls above. On error
// nothing is left behind.
func Create(name string) (*netlink.Handle, vnetns.NsHandle, error) {
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
	var h *netlink.Handle
	var ns vnetns.NsHandle
	err = OnFreshThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare: %w", err)
		}
		if err := unix.Mount("/proc/thread-self/ns/net", path, "none", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind namespace: %w", err)
		}
		for k, v := range sysctls {
			// /proc/sys/net shows the namespace of the thread that opens it.
			if err := os.WriteFile("/proc/sys/"+k, []byte(v), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("sysctl %s: %w", k, err)
			}
		}
		var err error
		// Sockets belong to the namespace they were opened in, so this handle
		// keeps working from any thread.
		if h, err = netlink.NewHandle(); err != nil {
			return fmt.Errorf("netlink: %w", err)
		}
		if ns, err = vnetns.GetFromPath("/proc/thread-self/ns/net"); err != nil {
			h.Close()
			return fmt.Errorf("open namespace: %w", err)
		}
		return nil
	})
	if err != nil {
		_ = Delete(name)
		return nil, vnetns.None(), fmt.Errorf("create netns %s: %w", name, err)
	}
	return h, ns, nil
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
