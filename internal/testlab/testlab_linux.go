//go:build linux

package testlab

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"

	"github.com/commlab/commlab/internal/host"
	"github.com/commlab/commlab/internal/hostns"
	"github.com/commlab/commlab/internal/testenv"
	"github.com/commlab/commlab/labs/cgroup"
)

// NIC is an interface that every node of a lab gets. Node i (from 0) has
// address 198.18.<Net>.<10+i>/24 on it.
type NIC struct {
	Name string // e.g. "rdma0"
	Net  int    // third octet of the NIC's /24
	MTU  int    // 0 means 1500
}

// Spec describes a lab.
type Spec struct {
	Nodes []string
	NICs  []NIC
	// Fabric plugs each NIC of every node into a bridge of its own
	// (host.BridgeName(nic)) in the fabric namespace cl-<id>-fab, through a veth
	// whose far end is host.FabricPort(i+1, nic), as labs/netns does. Without
	// it the lab has exactly two nodes and each NIC is one veth between them.
	Fabric bool
	// Shape, if set, gives the root qdisc for each end of a NIC's veth (link
	// index idx, in the node or in the fabric); nil leaves the kernel's default.
	Shape func(nic NIC, idx int) netlink.Qdisc
	// Confined gives each node's namespace a user namespace of its own
	// (hostns.CreateConfined), as labs/netns does.
	Confined bool
}

// Lab is a built lab.
type Lab struct {
	ID    string // sandbox id
	Nodes []string
	nics  []NIC
}

// NewID returns a fresh sandbox id for a test: 't' and 7 random characters.
func NewID() string { return "t" + host.NewID()[1:] }

// New builds the lab of spec, or skips t unless it runs as root. The lab is
// removed when the test ends.
func New(t testing.TB, spec Spec) *Lab {
	t.Helper()
	testenv.RequireRoot(t, "network namespaces")
	testenv.RequireTools(t, "ip")
	if !spec.Fabric && len(spec.Nodes) != 2 {
		t.Fatalf("testlab: a lab without a fabric has two nodes, not %d", len(spec.Nodes))
	}
	l := &Lab{ID: NewID(), Nodes: spec.Nodes, nics: slices.Clone(spec.NICs)}
	for i := range l.nics {
		if l.nics[i].MTU == 0 {
			l.nics[i].MTU = 1500
		}
	}
	t.Cleanup(func() { l.destroy(t) })
	if err := l.build(spec); err != nil {
		t.Fatalf("testlab %s: %v", l.ID, err)
	}
	return l
}

// NetNS is the namespace of node: cl-<id>-<node>.
func (l *Lab) NetNS(node string) string { return host.NetNSName(l.ID, node) }

// FabricNetNS is the namespace of the lab's bridges: cl-<id>-fab.
func (l *Lab) FabricNetNS() string { return host.FabricNetNSName(l.ID) }

// FabricPort is the fabric's end of node's NIC nic.
func (l *Lab) FabricPort(node, nic string) string { return host.FabricPort(l.index(node)+1, nic) }

// Addr is node's address on nic, without the prefix length.
func (l *Lab) Addr(node, nic string) string {
	for _, c := range l.nics {
		if c.Name == nic {
			return fmt.Sprintf("198.18.%d.%d", c.Net, 10+l.index(node))
		}
	}
	panic("testlab: no NIC " + nic)
}

func (l *Lab) index(node string) int {
	for i, n := range l.Nodes {
		if n == node {
			return i
		}
	}
	panic("testlab: no node " + node)
}

// Run runs argv in node's namespace and returns its combined output; it fails
// the test if the command fails.
func (l *Lab) Run(t testing.TB, node string, argv ...string) string {
	t.Helper()
	out, err := l.Try(node, argv...)
	if err != nil {
		t.Fatalf("%s: %s: %v\n%s", node, strings.Join(argv, " "), err, out)
	}
	return out
}

// Try runs argv in node's namespace and returns its combined output and error.
func (l *Lab) Try(node string, argv ...string) (string, error) { return TryIn(l.NetNS(node), argv...) }

// TryIn runs argv in the named namespace (ip netns exec), for at most a minute.
func TryIn(ns string, argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns}, argv...)...).CombinedOutput()
	return string(out), err
}

// nsHandle is an open namespace and a netlink handle in it.
type nsHandle struct {
	h  *netlink.Handle
	ns vnetns.NsHandle
}

func (n nsHandle) close() { n.h.Close(); n.ns.Close() }

func create(name string, confined bool) (nsHandle, error) {
	mk := hostns.Create
	if confined {
		mk = hostns.CreateConfined
	}
	h, ns, err := mk(name)
	return nsHandle{h, ns}, err
}

// build creates the namespaces and wires them; on an error, destroy removes
// whatever it left.
func (l *Lab) build(spec Spec) error {
	nodes := make([]nsHandle, len(l.Nodes))
	for i, n := range l.Nodes {
		nh, err := create(l.NetNS(n), spec.Confined)
		if err != nil {
			return err
		}
		defer nh.close()
		if err := hostns.SetUp(nh.h, "lo"); err != nil {
			return err
		}
		nodes[i] = nh
	}
	var fab nsHandle
	if spec.Fabric {
		var err error
		if fab, err = create(l.FabricNetNS(), false); err != nil {
			return err
		}
		defer fab.close()
	}
	for _, c := range l.nics {
		if !spec.Fabric {
			if err := veth(spec, c, nodes[0], c.Name, nodes[1], c.Name, ""); err != nil {
				return err
			}
		} else {
			br := host.BridgeName(c.Name)
			if err := fab.h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: br, MTU: c.MTU, Flags: net.FlagUp}}); err != nil {
				return fmt.Errorf("add bridge %s: %w", br, err)
			}
			for i, nh := range nodes {
				if err := veth(spec, c, nh, c.Name, fab, host.FabricPort(i+1, c.Name), br); err != nil {
					return err
				}
			}
		}
		for i, nh := range nodes {
			if err := addAddr(nh.h, c.Name, l.Addr(l.Nodes[i], c.Name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// veth creates nic c's veth with end a in namespace na and end b in nb, plugs
// b into bridge br (in nb) unless br is "", puts spec's root qdisc on both ends
// and sets them up.
func veth(spec Spec, c NIC, na nsHandle, a string, nb nsHandle, b string, br string) error {
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: a, MTU: c.MTU}, PeerName: b,
		PeerNamespace: netlink.NsFd(int(nb.ns)), PeerMTU: uint32(c.MTU)}
	if err := na.h.LinkAdd(v); err != nil {
		return fmt.Errorf("add veth %s (peer %s): %w", a, b, err)
	}
	if br != "" {
		if err := plug(nb.h, b, br); err != nil {
			return err
		}
	}
	for _, end := range []struct {
		h    *netlink.Handle
		name string
	}{{na.h, a}, {nb.h, b}} {
		link, err := end.h.LinkByName(end.name)
		if err != nil {
			return fmt.Errorf("find %s: %w", end.name, err)
		}
		if spec.Shape != nil {
			if err := end.h.QdiscReplace(spec.Shape(c, link.Attrs().Index)); err != nil {
				return fmt.Errorf("root qdisc on %s: %w", end.name, err)
			}
		}
		if err := end.h.LinkSetUp(link); err != nil {
			return fmt.Errorf("set %s up: %w", end.name, err)
		}
	}
	return nil
}

// plug makes bridge br the master of port.
func plug(h *netlink.Handle, port, br string) error {
	p, err := h.LinkByName(port)
	if err != nil {
		return fmt.Errorf("find %s: %w", port, err)
	}
	b, err := h.LinkByName(br)
	if err != nil {
		return fmt.Errorf("find %s: %w", br, err)
	}
	if err := h.LinkSetMaster(p, b); err != nil {
		return fmt.Errorf("plug %s into %s: %w", port, br, err)
	}
	return nil
}

func addAddr(h *netlink.Handle, nic, ip string) error {
	link, err := h.LinkByName(nic)
	if err != nil {
		return fmt.Errorf("find %s: %w", nic, err)
	}
	addr, err := netlink.ParseAddr(ip + "/24")
	if err != nil {
		return err
	}
	if err := h.AddrAdd(link, addr); err != nil {
		return fmt.Errorf("add %s to %s: %w", addr, nic, err)
	}
	return nil
}

// destroy removes the lab's namespaces and fails t if anything of the lab is
// left on the host.
func (l *Lab) destroy(t testing.TB) {
	for _, name := range append(l.namespaces(), l.FabricNetNS()) {
		if err := hostns.Delete(name); err != nil {
			t.Errorf("testlab: %v", err)
		}
	}
	if left := Leftovers(l.ID); len(left) > 0 {
		t.Errorf("testlab: sandbox %s left:\n%s", l.ID, strings.Join(left, "\n"))
	}
}

func (l *Lab) namespaces() []string {
	var out []string
	for _, n := range l.Nodes {
		out = append(out, l.NetNS(n))
	}
	return out
}

// cgroupHierarchies are where a sandbox's cgroup may be found: the v1
// controllers commlab uses, the hybrid unified tree and the v2 root.
var cgroupHierarchies = []string{"pids", "memory", "cpu", "cpuacct", "cpuset", "unified", ""}

// Leftovers lists every trace of sandbox id on the host, asking the same tools
// an operator would: ip netns list, ip link, nft list tables, the cgroup tree,
// and the nodes' run-time directory.
func Leftovers(id string) []string {
	var left []string
	for _, argv := range [][]string{{"ip", "netns", "list"}, {"ip", "-o", "link"}, {"nft", "list", "tables"}} {
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		if err != nil {
			left = append(left, fmt.Sprintf("%s failed: %v %s", strings.Join(argv, " "), err, out))
			continue
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, host.Prefix+id+"-") || strings.HasSuffix(strings.TrimSpace(line), " "+host.Prefix+id) {
				left = append(left, strings.Join(argv, " ")+": "+line)
			}
		}
	}
	for _, c := range cgroupHierarchies {
		p := filepath.Join(cgroup.MountRoot, c, host.SandboxCgroup(id))
		if exists(p) {
			left = append(left, "cgroup "+p)
		}
	}
	if p := path.Dir(path.Dir(host.NodeEtcDir(id, "n"))); exists(p) {
		left = append(left, "file "+p)
	}
	return left
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
