//go:build linux

package netns

import (
	"fmt"
	"os"
	"sync"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"

	"github.com/commlab/commlab/labs"
)

// Features are what the running kernel and host offer the netns backend,
// probed once per process in a throw-away namespace.
type Features struct {
	TBF      bool
	HTB      bool
	Netem    bool
	NFTables bool
	Bridge   bool
	Veth     bool
	// Err says why probing failed (e.g. not root); the fields are then false.
	Err error
}

var (
	probeOnce sync.Once
	probed    Features
)

// Probe reports the host's features. It creates a namespace cl-probe<pid>-fab,
// tries each feature on its loopback device, and removes it.
func Probe() Features {
	probeOnce.Do(func() { probed = probe() })
	return probed
}

func probe() (f Features) {
	if os.Geteuid() != 0 {
		f.Err = fmt.Errorf("%w: probing needs root", labs.ErrUnsupported)
		return f
	}
	name := FabricNetNSName(fmt.Sprintf("probe%d", os.Getpid()%10000000))
	h, ns, err := createNetNS(name)
	if err != nil {
		f.Err = err
		return f
	}
	defer func() { _ = deleteNetNS(name) }()
	defer ns.Close()
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		f.Err = err
		return f
	}
	try := func(q netlink.Qdisc) bool {
		if err := h.QdiscAdd(q); err != nil {
			return false
		}
		_ = h.QdiscDel(q)
		return true
	}
	root := netlink.QdiscAttrs{LinkIndex: lo.Attrs().Index, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT}
	f.TBF = try(&netlink.Tbf{QdiscAttrs: root, Rate: 125000, Limit: 10000, Buffer: netlink.Xmittime(125000, 3000)})
	f.HTB = try(netlink.NewHtb(root))
	f.Netem = try(netlink.NewNetem(root, netlink.NetemQdiscAttrs{Latency: 1000}))
	br := &netlink.Bridge{LinkAttrs: netlink.NewLinkAttrs()}
	br.Name = "probe0"
	if f.Bridge = h.LinkAdd(br) == nil; f.Bridge {
		_ = h.LinkDel(br)
	}
	v := &netlink.Veth{LinkAttrs: netlink.NewLinkAttrs(), PeerName: "probe2"}
	v.Name = "probe1"
	if f.Veth = h.LinkAdd(v) == nil; f.Veth {
		_ = h.LinkDel(v)
	}
	if c, err := nftables.New(nftables.WithNetNSFd(int(ns))); err == nil {
		c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "probe"})
		f.NFTables = c.Flush() == nil
	}
	return f
}

// Capabilities says what this sandbox offers: its topology's nodes and rails,
// no GPUs and no RDMA devices, and what the kernel supports (probed once).
func (s *Sandbox) Capabilities() labs.Capabilities {
	f := Probe()
	_, bashErr := os.Stat(ShellPath)
	return labs.Capabilities{
		Backend:         "netns",
		Nodes:           s.topo.NodeNames(),
		Rails:           s.topo.Rails(),
		IntraNodeFabric: s.topo.IntraNode != nil && f.TBF,
		Shaping:         f.TBF,
		Netem:           f.Netem,
		NFTables:        f.NFTables,
		Shell:           f.Err == nil && bashErr == nil,
	}
}
