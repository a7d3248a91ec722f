//go:build linux

package injector

import (
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/commlab/commlab/internal/host"
)

// TestTCObjects: the tc objects a fault adds carry the handles and priority of
// internal/host, the only ones the injector will later delete (no root needed).
func TestTCObjects(t *testing.T) {
	q := newTbf(7, netlink.HANDLE_ROOT, Rate(40e6), 1500)
	if q.Handle != host.FaultQdiscHandle || netlink.HandleStr(q.Handle) != "c2:0" || q.LinkIndex != 7 || q.Parent != netlink.HANDLE_ROOT {
		t.Errorf("fault tbf %+v: want handle c2: at the root of link 7", q.QdiscAttrs)
	}
	if q.Rate != 5e6 {
		t.Errorf("tbf rate %d B/s, want 5000000 (40 Mbit/s)", q.Rate)
	}
	f := ingressRedirect(7, 9)
	if f.Priority != host.FaultFilterPrio || host.FaultFilterPrio != 193 || f.Parent != 0xfffffff2 || f.Protocol != unix.ETH_P_ALL {
		t.Errorf("redirect filter %+v: want pref 193 (tc prints it so) on ffff:fff2 for all protocols", f.FilterAttrs)
	}
	if f.Sel.Flags&nl_TC_U32_TERMINAL == 0 || len(f.Sel.Keys) != 1 || f.Sel.Keys[0].Mask != 0 {
		t.Errorf("u32 selector %+v: want one match-all key, terminal", f.Sel)
	}
	m, ok := f.Actions[0].(*netlink.MirredAction)
	if len(f.Actions) != 1 || !ok || m.Ifindex != 9 || m.MirredAction != netlink.TCA_EGRESS_REDIR {
		t.Errorf("actions %+v: want one mirred egress redirect to link 9", f.Actions)
	}
	if !host.IsBaseQdisc(host.BaseQdiscHandle) || host.IsFaultQdisc(host.BaseQdiscHandle) {
		t.Error("the lab's base qdisc c1: must never read as a fault's")
	}
}
