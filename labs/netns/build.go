//go:build linux

package netns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	// Named so: the package's tests have a helper host().
	clhost "github.com/commlab/commlab/internal/host"
	"github.com/commlab/commlab/internal/hostns"
	"github.com/commlab/commlab/labs"
	"github.com/commlab/commlab/labs/cgroup"
	"github.com/commlab/commlab/labs/topology"
)

// The tbf that shapes every link at its base rate (on both ends of each veth and
// on loopback for the intra-node fabric) carries clhost.BaseQdiscHandle (c1:); a
// fault that changes a rate replaces it and must put it back.

// loopbackMaxPacket is the largest packet loopback hands to its qdisc (64 KiB
// GSO super-packets plus headers).
const loopbackMaxPacket = 65536 + 256

// TBFParams sizes a tbf for rate on a device whose largest packet is
// maxPacket bytes ([topology.Rate.TBF]). GSO stays on: tbf charges a GSO
// packet for every segment's bytes and splits one larger than the bucket, and
// on a 2-core host one-segment packets cost enough CPU to reorder and slow a
// 200Mbit link (measured 178 vs 191 Mbit/s goodput, the most 1448/1514 of
// 200Mbit allows). It returns the rate in bytes/s, the bucket in kernel ticks
// (as netlink wants) and the limit in bytes.
func TBFParams(rate topology.Rate, maxPacket int) (bytesPerSec uint64, bufferTicks, limit uint32, burst uint32) {
	bytesPerSec = rate.BytesPerSecond()
	b, l := rate.TBF(maxPacket)
	return bytesPerSec, netlink.Xmittime(bytesPerSec, uint32(b)), uint32(l), uint32(b)
}

// shape puts the base tbf on link.
func shape(h *netlink.Handle, link netlink.Link, rate topology.Rate, maxPacket int) error {
	bps, buffer, limit, _ := TBFParams(rate, maxPacket)
	q := &netlink.Tbf{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: link.Attrs().Index, Handle: clhost.BaseQdiscHandle, Parent: netlink.HANDLE_ROOT},
		Rate:       bps, Buffer: buffer, Limit: limit,
	}
	if err := h.QdiscReplace(q); err != nil {
		return fmt.Errorf("add tbf %s on %s: %w", rate, link.Attrs().Name, err)
	}
	return nil
}

// build creates the sandbox's cgroup, learner home, fabric and nodes. It
// stops at the first error and leaves the cleanup to destroy.
func build(ctx context.Context, log *slog.Logger, st *State, plan *topology.Plan) error {
	id := st.ID
	cg, err := cgroup.New(CgroupPath(id), st.Limits)
	if err != nil {
		return err
	}
	for _, n := range plan.Nodes {
		if err := nodeCgroups(cg, n.Name); err != nil {
			return err
		}
	}
	if err := makeHome(st); err != nil {
		return err
	}
	if err := writeHosts(id, plan); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}

	fab, fabNS, err := hostns.Create(FabricNetNSName(id))
	if err != nil {
		return err
	}
	defer fab.Close()
	defer fabNS.Close()
	if err := hostns.SetUp(fab, "lo"); err != nil {
		return err
	}
	bridges := map[string]int{}
	for _, sw := range plan.Nets {
		br := &netlink.Bridge{LinkAttrs: netlink.NewLinkAttrs()}
		br.Name, br.MTU, br.Flags = clhost.BridgeName(sw.Name), sw.MTU, net.FlagUp
		off := false
		br.MulticastSnooping = &off
		if err := fab.LinkAdd(br); err != nil {
			return fmt.Errorf("add bridge %s: %w", br.Name, err)
		}
		l, err := fab.LinkByName(br.Name)
		if err != nil {
			return fmt.Errorf("find bridge %s: %w", br.Name, err)
		}
		bridges[sw.Name] = l.Attrs().Index
	}
	if err := addTable(fabNS, id); err != nil {
		return err
	}

	for n, node := range plan.Nodes {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := buildNode(fab, fabNS, bridges, n+1, NetNSName(id, node.Name), node, plan.Topo.IntraNode); err != nil {
			return fmt.Errorf("node %s: %w", node.Name, err)
		}
	}
	log.Debug("sandbox up", "index", st.Index, "slice", plan.Slice, "nodes", len(plan.Nodes))
	return nil
}

// buildNode creates node number n's namespace, owned by a user namespace of its
// own (hostns.CreateConfined: learners' capabilities count in their node only),
// and wires each NIC to its switch: a veth created inside the node with its
// peer created directly in the fabric (never in the host namespace, which would
// give the node a netnsid pointing at the host), shaped on both ends.
func buildNode(fab *netlink.Handle, fabNS vnetns.NsHandle, bridges map[string]int, n int, nsName string, node topology.NodePlan, intra *topology.IntraNode) error {
	h, ns, err := hostns.CreateConfined(nsName)
	if err != nil {
		return err
	}
	defer h.Close()
	defer ns.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("find lo: %w", err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return fmt.Errorf("set lo up: %w", err)
	}
	if intra != nil && intra.Rate > 0 {
		if err := shape(h, lo, intra.Rate, loopbackMaxPacket); err != nil {
			return fmt.Errorf("intra-node fabric: %w", err)
		}
	}
	for _, c := range node.NICs {
		peer := clhost.FabricPort(n, c.Name)
		v := &netlink.Veth{LinkAttrs: netlink.NewLinkAttrs(), PeerName: peer, PeerNamespace: netlink.NsFd(ns2fd(fabNS)), PeerMTU: uint32(c.MTU)}
		v.Name, v.MTU = c.Name, c.MTU
		if err := h.LinkAdd(v); err != nil {
			return fmt.Errorf("add veth %s (peer %s): %w", c.Name, peer, err)
		}
		nic, err := h.LinkByName(c.Name)
		if err != nil {
			return fmt.Errorf("find %s: %w", c.Name, err)
		}
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: c.Addr.Addr().AsSlice(), Mask: net.CIDRMask(c.Addr.Bits(), 32)}}
		if err := h.AddrAdd(nic, addr); err != nil {
			return fmt.Errorf("add %s to %s: %w", c.Addr, c.Name, err)
		}
		if err := h.LinkSetUp(nic); err != nil {
			return fmt.Errorf("set %s up: %w", c.Name, err)
		}
		p, err := fab.LinkByName(peer)
		if err != nil {
			return fmt.Errorf("find fabric port %s: %w", peer, err)
		}
		if err := fab.LinkSetMasterByIndex(p, bridges[c.Switch]); err != nil {
			return fmt.Errorf("plug %s into %s: %w", peer, clhost.BridgeName(c.Switch), err)
		}
		if err := fab.LinkSetUp(p); err != nil {
			return fmt.Errorf("set %s up: %w", peer, err)
		}
		if c.Rate > 0 {
			if err := shape(h, nic, c.Rate, c.MTU+14); err != nil {
				return err
			}
			if err := shape(fab, p, c.Rate, c.MTU+14); err != nil {
				return err
			}
		}
	}
	return nil
}

func ns2fd(ns vnetns.NsHandle) int { return int(ns) }

// addTable creates the sandbox's nftables table in the fabric namespace: a
// bridge-family table with an accepting forward chain, where switch-level
// faults (drops on a port, congestion marks) can hang their rules.
func addTable(fabNS vnetns.NsHandle, id string) error {
	c, err := nftables.New(nftables.WithNetNSFd(ns2fd(fabNS)))
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyBridge, Name: NFTable(id)})
	accept := nftables.ChainPolicyAccept
	c.AddChain(&nftables.Chain{
		Name: "forward", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &accept,
	})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("add nftables table %s: %w", NFTable(id), err)
	}
	return nil
}

// makeHome mounts the sandbox's run-time tmpfs (size-limited, so a learner
// cannot fill the host's disk or /run) and lays out the learner's home and
// tmp in it; shells see them as /home/learner and /tmp.
func makeHome(st *State) error {
	dir := sandboxRunDir(st.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	opts := "size=" + strconv.FormatInt(st.HomeSize, 10) + ",mode=0755"
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	uid := int(st.LearnerUID)
	for _, d := range []struct {
		path string
		mode os.FileMode
		own  bool
	}{
		{"home", 0o755, false},
		{"home/learner", 0o700, true},
		{"tmp", 0o777 | os.ModeSticky, false},
	} {
		p := filepath.Join(dir, d.path)
		if err := os.Mkdir(p, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", p, err)
		}
		if err := os.Chmod(p, d.mode); err != nil {
			return err
		}
		if d.own {
			if err := os.Chown(p, uid, uid); err != nil {
				return err
			}
		}
	}
	return writeProfile(filepath.Join(dir, "home/learner"), uid)
}

func writeProfile(home string, uid int) error {
	p := filepath.Join(home, ".bash_profile")
	if err := os.WriteFile(p, []byte(labs.LearnerProfile), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	return os.Chown(p, uid, uid)
}

// WorkloadCPUWeight is the CPU weight (cgroup v2 units; the default is 100) of a
// node's workload leaf against its shell leaf: when both want the CPU, the shells
// get ten parts in eleven, so a lab's ranks do not make its terminals lag. Between
// sandboxes the weights are equal, so one lab's workload takes no more than its
// share from another's shells either.
const WorkloadCPUWeight = 10

// nodeCgroups creates node's cgroup under the sandbox's and its two leaves: the
// shells' at the default weight and the workload's at WorkloadCPUWeight.
func nodeCgroups(sandbox *cgroup.Group, node string) error {
	g, err := sandbox.Child(node, cgroup.Limits{})
	if err != nil {
		return err
	}
	if _, err := g.Child(clhost.ShellLeaf, cgroup.Limits{}); err != nil {
		return err
	}
	_, err = g.Child(clhost.WorkloadLeaf, cgroup.Limits{CPUWeight: WorkloadCPUWeight})
	return err
}

// destroy removes every object of sandbox id, whatever state it is in: it
// kills the sandbox's processes (which may hold namespaces), removes its
// namespaces, cgroup, run-time tmpfs, state file and slot. st may be nil
// (nothing recorded). Missing objects are not errors.
func destroy(ctx context.Context, log *slog.Logger, id string, st *State) error {
	var errs []error
	if g, err := cgroup.Open(CgroupPath(id)); err == nil {
		if err := g.Destroy(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	names, err := namespacesOf(id)
	if err != nil {
		errs = append(errs, err)
	}
	for _, name := range names {
		if err := hostns.Delete(name); err != nil {
			errs = append(errs, err)
		}
	}
	if err := removeRunDir(id); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		// Keep state and slot so a later sweep can finish the job.
		return errors.Join(errs...)
	}
	if st != nil {
		if err := os.Remove(statePath(st.DataDir, id)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove state: %w", err))
		}
		releaseSlot(st.Index, id)
	}
	log.Debug("sandbox removed", "namespaces", len(names))
	return errors.Join(errs...)
}

// namespacesOf lists the names of sandbox id's namespaces under /run/netns.
func namespacesOf(id string) ([]string, error) {
	ents, err := os.ReadDir(netnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", netnsDir, err)
	}
	prefix := Prefix + id + "-"
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// removeRunDir unmounts and removes the sandbox's run-time directory.
func removeRunDir(id string) error {
	dir := sandboxRunDir(id)
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	// Only an empty directory can be left once the tmpfs is gone; refuse to
	// recurse into anything else.
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}

// releaseSlot removes slot index's lease if it still names id.
func releaseSlot(index int, id string) {
	l, ok := readSlots()[index]
	if ok && (l.ID == id || l.ID == "") {
		_ = os.Remove(slotPath(index))
	}
}
