//go:build linux

package netns

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
)

// onFreshThread runs fn on an OS thread of its own that is thrown away
// afterwards, so fn may change the thread's namespaces (setns, unshare)
// without them leaking to other goroutines. The main thread is never used:
// it cannot be thrown away, and the process's /proc/<pid>/ns files show it.
func onFreshThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// Keep the main thread busy so the retry lands on another one.
			errc <- onFreshThread(fn)
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
		if err = os.MkdirAll(netnsDir, 0o755); err != nil {
			return
		}
		if unix.Mount("", netnsDir, "none", unix.MS_SHARED|unix.MS_REC, "") == nil {
			return
		}
		// Not a mount point yet: bind it onto itself first (what `ip netns add` does).
		if err = unix.Mount(netnsDir, netnsDir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			err = fmt.Errorf("bind %s: %w", netnsDir, err)
			return
		}
		if err = unix.Mount("", netnsDir, "none", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
			err = fmt.Errorf("make %s shared: %w", netnsDir, err)
		}
	})
	return err
}

// sysctlsNewNS are written in every sandbox namespace right after creation.
// IPv6 is off so no router solicitations or DAD probes add traffic that
// learners would have to explain; forwarding stays off (nodes are hosts).
var sysctlsNewNS = map[string]string{
	"net/ipv6/conf/all/disable_ipv6":     "1",
	"net/ipv6/conf/default/disable_ipv6": "1",
	"net/ipv4/ip_forward":                "0",
}

// createNetNS creates the named network namespace and returns a netlink
// handle and an open file for it. The namespace is created on a throw-away
// thread (unshare), bound at /run/netns/<name> like `ip netns add`, and given
// sysctlsNewNS. On error nothing is left behind.
func createNetNS(name string) (*netlink.Handle, vnetns.NsHandle, error) {
	if err := prepareNetnsDir(); err != nil {
		return nil, vnetns.None(), err
	}
	path := filepath.Join(netnsDir, name)
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return nil, vnetns.None(), fmt.Errorf("create netns %s: %w", name, err)
	}
	f.Close()
	var h *netlink.Handle
	var ns vnetns.NsHandle
	err = onFreshThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare: %w", err)
		}
		if err := unix.Mount("/proc/thread-self/ns/net", path, "none", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind namespace: %w", err)
		}
		for k, v := range sysctlsNewNS {
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
		_ = deleteNetNS(name)
		return nil, vnetns.None(), fmt.Errorf("create netns %s: %w", name, err)
	}
	return h, ns, nil
}

// deleteNetNS unbinds and removes /run/netns/<name>; a missing one is not an
// error. The kernel frees the namespace (and its links) once no process or
// open file holds it.
func deleteNetNS(name string) error {
	path := filepath.Join(netnsDir, name)
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount netns %s: %w", name, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove netns %s: %w", name, err)
	}
	return nil
}

// openNetNS opens an existing sandbox namespace and a netlink handle in it.
func openNetNS(name string) (*netlink.Handle, vnetns.NsHandle, error) {
	ns, err := vnetns.GetFromPath(filepath.Join(netnsDir, name))
	if err != nil {
		return nil, vnetns.None(), fmt.Errorf("open netns %s: %w", name, err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		ns.Close()
		return nil, vnetns.None(), fmt.Errorf("netlink in netns %s: %w", name, err)
	}
	return h, ns, nil
}
