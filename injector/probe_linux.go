//go:build linux

package injector

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/commlab/commlab/internal/hostns"
)

func probe(ctx context.Context) Features {
	f := Features{Tools: map[string]string{}, Notes: map[string]string{}}
	for _, t := range []string{"iperf3", "unshare", "nsenter", "ip", "mount"} {
		if p, err := lookTool(t); err == nil {
			f.Tools[t] = p
		}
	}
	f.Cgroup = cgMode()
	removeStaleProbes()
	// The name says which process made it, so one killed mid-probe can be cleaned up.
	name := fmt.Sprintf("cl-probe-%d-%d", os.Getpid(), procStart(os.Getpid()))
	h, ns, err := hostns.Create(name)
	if err != nil {
		note := fmt.Sprintf("could not create a scratch namespace: %v", err)
		for _, k := range []Feature{NeedTBF, NeedNetem, NeedIFB, NeedNftables} {
			f.Notes[string(k)] = note
		}
		return f
	}
	defer hostns.Delete(name)
	defer ns.Close()
	defer h.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "cl-p0"}, PeerName: "cl-p1"}
	if err := h.LinkAdd(veth); err != nil {
		f.Notes[string(NeedTBF)] = fmt.Sprintf("create veth: %v", err)
		return f
	}
	f.Veth = true
	link, err := h.LinkByName("cl-p0")
	if err != nil {
		return f
	}
	idx := link.Attrs().Index
	f.Bridge = h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "cl-pbr"}}) == nil
	// Each kind gets its own handle: replacing a root qdisc by one of another
	// kind under the same handle is refused whatever the kernel supports.
	root := func(major uint16) netlink.QdiscAttrs {
		return netlink.QdiscAttrs{LinkIndex: idx, Parent: netlink.HANDLE_ROOT, Handle: netlink.MakeHandle(major, 0)}
	}
	try := func(q netlink.Qdisc) error { return h.QdiscReplace(q) }
	if err := try(&netlink.Tbf{QdiscAttrs: root(1), Rate: 125000, Limit: 10000, Buffer: netlink.Xmittime(125000, 3000)}); err == nil {
		f.TBF = true
	} else {
		f.Notes[string(NeedTBF)] = err.Error()
	}
	if err := try(netlink.NewHtb(root(2))); err == nil {
		f.HTB = true
	}
	if err := try(netlink.NewNetem(root(3), netlink.NetemQdiscAttrs{Latency: 1000})); err == nil {
		f.Netem = true
	} else {
		f.Notes[string(NeedNetem)] = "sch_netem: " + err.Error()
	}
	if err := h.LinkAdd(&netlink.Ifb{LinkAttrs: netlink.LinkAttrs{Name: "cl-pifb"}}); err == nil {
		f.IFB = true
		if ifb, err := h.LinkByName("cl-pifb"); err == nil {
			if err := addIngressRedirect(h, idx, ifb.Attrs().Index); err == nil {
				f.Mirred = true
			} else {
				f.Notes[string(NeedIFB)] = err.Error()
			}
		}
	} else {
		f.Notes[string(NeedIFB)] = "ifb: " + err.Error()
	}
	if err := probeNft(ns); err != nil {
		f.Notes[string(NeedNftables)] = err.Error()
	} else {
		f.Nftables = true
	}
	f.NftBridge = probeNftBridge(ns) == nil
	_ = ctx
	return f
}

func probeNft(ns netns.NsHandle) error {
	c, err := nftables.New(nftables.WithNetNSFd(int(ns)))
	if err != nil {
		return err
	}
	t := c.AddTable(&nftables.Table{Name: "commlab-probe", Family: nftables.TableFamilyNetdev})
	ch := c.AddChain(&nftables.Chain{Name: "in", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookIngress, Priority: nftables.ChainPriorityFilter, Device: "cl-p0"})
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: randomBelow(1, 10000, &expr.Verdict{Kind: expr.VerdictDrop})})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables netdev ingress with numgen: %w", err)
	}
	return nil
}

// probeNftBridge tries a bridge-family table, as labs/netns puts in each fabric.
func probeNftBridge(ns netns.NsHandle) error {
	c, err := nftables.New(nftables.WithNetNSFd(int(ns)))
	if err != nil {
		return err
	}
	c.AddTable(&nftables.Table{Name: "commlab-probe-br", Family: nftables.TableFamilyBridge})
	return c.Flush()
}

// removeStaleProbes deletes scratch namespaces of probes whose process is gone.
func removeStaleProbes() {
	ents, err := os.ReadDir(netnsDir)
	if err != nil {
		return
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), "cl-probe-")
		if !ok {
			continue
		}
		pid, start, _ := strings.Cut(rest, "-")
		p, err1 := strconv.Atoi(pid)
		st, err2 := strconv.ParseUint(start, 10, 64)
		if err1 != nil || err2 != nil || (Proc{PID: p, Start: st}).alive() {
			continue
		}
		_ = hostns.Delete(e.Name())
	}
}
