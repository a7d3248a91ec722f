//go:build linux

package injector

import (
	"strings"
	"testing"
)

// TestNICFlapCarrierRoundTrip: in carrier mode the NIC stays administratively UP
// and keeps its route while the far end of its veth is down; a connect then fails
// with EHOSTUNREACH (ARP gets no answer), not ENETUNREACH as after "ip link set
// down". The debrief command names the far end it toggled.
func TestNICFlapCarrierRoundTrip(t *testing.T) {
	l := newLab(t, 1500, "n1", "n2")
	in := newInjector(t)
	// 90% of 20 s: the first down phase outlasts the checks.
	f := mustParse(t, in, "nic-flap", map[string]string{"nic": "rdma0", "period": "20s", "duty": "90%", "mode": "carrier"})
	roundTrip(t, l, in, "n1", f, func(t *testing.T, e Entry) {
		link := l.Run(t, "n1", "ip", "link", "show", "dev", "rdma0")
		mustContain(t, "ip link show rdma0", link, "NO-CARRIER", ",UP", "state DOWN")
		route := l.Run(t, "n1", "ip", "route", "show", "dev", "rdma0")
		mustContain(t, "ip route show dev rdma0", route, "linkdown")
		out, err := l.Try("n1", "bash", "-c", "exec 3<>/dev/tcp/"+l.Addr("n2", "rdma0")+"/5555")
		if err == nil || !strings.Contains(out, "No route to host") {
			t.Errorf("connect over a NIC without carrier: %v %q, want No route to host (EHOSTUNREACH)", err, out)
		}
		cmd := strings.Join(e.Command, " ")
		if want := "ip -n " + l.FabricNetNS() + " link set dev " + l.FabricPort("n1", "rdma0") + " down"; !strings.Contains(cmd, want) {
			t.Errorf("debrief command %q lacks %q", cmd, want)
		}
		if p := tagged(e.ID); len(p) != 1 {
			t.Errorf("flap driver processes: %v, want one", p)
		}
	})
	mustContain(t, "ip link show rdma0 after revert", l.Run(t, "n1", "ip", "link", "show", "dev", "rdma0"), "state UP")
}

func TestNICFlapModeValidate(t *testing.T) {
	for _, tc := range []struct {
		mode string
		ok   bool
	}{{"", true}, {"admin", true}, {"carrier", true}, {"cable", false}} {
		f := &NICFlap{NIC: "rdma0", Period: Duration(10e9), Duty: 5000, Mode: tc.mode}
		if err := f.Validate(); (err == nil) != tc.ok {
			t.Errorf("mode %q: %v, want ok=%v", tc.mode, err, tc.ok)
		}
	}
}
