package injector

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// errGone is returned by openNS when the fault's namespace no longer exists (or is
// a different namespace now); a revert then has nothing left to do.
var errGone = errors.New("namespace gone")

// openNS opens t's namespace and checks it is the one the fault was applied to.
func openNS(t Target) (netns.NsHandle, error) {
	if err := validNetNS(t.netnsName()); err != nil {
		return netns.None(), err
	}
	if t.BootID != "" && !sameBoot(t.BootID) {
		return netns.None(), errGone
	}
	ns, err := netns.GetFromPath(t.netnsPath())
	if errors.Is(err, os.ErrNotExist) {
		return netns.None(), errGone
	}
	if err != nil {
		return netns.None(), fmt.Errorf("open namespace %s: %w", t.netnsPath(), err)
	}
	ino, _, err := fstat(int(ns))
	if err != nil {
		ns.Close()
		return netns.None(), fmt.Errorf("stat namespace %s: %w", t.netnsPath(), err)
	}
	if t.NetNSInode != 0 && ino != t.NetNSInode {
		ns.Close()
		return netns.None(), errGone
	}
	return ns, nil
}

// linkNames lists the NICs of a namespace, loopback excluded.
func linkNames(h *netlink.Handle) ([]string, error) {
	links, err := h.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	var out []string
	for _, l := range links {
		if n := l.Attrs().Name; n != "lo" {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

// linkIn finds nic in t's namespace; a missing NIC is ErrInvalid naming the NICs there.
func linkIn(h *netlink.Handle, t Target, nic string) (netlink.Link, error) {
	if err := ValidNIC(nic); err != nil {
		return nil, err
	}
	l, err := h.LinkByName(nic)
	if err == nil {
		return l, nil
	}
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) {
		names, _ := linkNames(h)
		return nil, invalid("node %s has no NIC %q (it has: %s)", t, nic, strings.Join(names, ", "))
	}
	return nil, fmt.Errorf("find %s in %s: %w", nic, t.netnsName(), err)
}

// isGone reports whether err means the object is already absent.
func isGone(err error) bool {
	if err == nil {
		return false
	}
	var nf netlink.LinkNotFoundError
	return errors.Is(err, errGone) || errors.As(err, &nf) ||
		errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENODEV) || errors.Is(err, syscall.ESRCH)
}
