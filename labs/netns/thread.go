//go:build linux

package netns

import (
	"fmt"
	"path/filepath"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
)

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
