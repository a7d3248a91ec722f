//go:build linux

package injector

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// netlinkAt returns a netlink handle inside t's namespace.
func netlinkAt(t Target) (*netlink.Handle, error) {
	ns, err := openNS(t)
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink in %s: %w", t.netnsName(), err)
	}
	return h, nil
}

// checkNICs validates every nic against the link list of t's namespace.
func checkNICs(t Target, nics []string) error {
	if len(nics) == 0 {
		return nil
	}
	h, err := netlinkAt(t)
	if errors.Is(err, errGone) {
		return invalid("node %s: namespace %s does not exist", t, t.netnsPath())
	}
	if err != nil {
		return err
	}
	defer h.Close()
	for _, n := range nics {
		if _, err := linkIn(h, t, n); err != nil {
			return err
		}
	}
	return nil
}
