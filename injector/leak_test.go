//go:build linux

package injector

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestNothingListableNamesTheFault applies network faults in one node and reads
// everything a learner with CAP_NET_ADMIN there can list: no kind and no label
// (the rules themselves, e.g. a drop, are the evidence to find), only the
// neutral table name and the fault id.
func TestNothingListableNamesTheFault(t *testing.T) {
	l := newLab(t, 1500, "n1", "n2")
	in := newInjector(t)
	faults := []struct {
		kind   string
		params map[string]string
	}{
		{"port-block", map[string]string{"ports": "29500", "nic": "rdma0"}},
		{"roce-drop", map[string]string{"nic": "rdma0", "direction": "in"}},
		{"loss", map[string]string{"nic": "rdma0", "percent": "5%", "direction": "out"}},
		{"nic-rate", map[string]string{"nic": "rdma0", "rate": "1Gbit", "direction": "both"}},
		{"delay", map[string]string{"nic": "eth0", "delay": "1ms", "jitter": "100us"}},
	}
	var ids []string
	for _, f := range faults {
		e, err := in.Apply(ctxT(t), l.target("n1"), mustParse(t, in, f.kind, f.params), time.Minute)
		if err != nil {
			t.Fatalf("apply %s: %v", f.kind, err)
		}
		ids = append(ids, e.ID)
	}
	var seen strings.Builder
	for _, argv := range [][]string{
		{"nft", "list", "ruleset"},
		{"tc", "-d", "qdisc", "show"},
		{"tc", "filter", "show", "dev", "rdma0", "ingress"},
		{"tc", "filter", "show", "dev", "rdma0", "egress"},
		{"tc", "filter", "show", "dev", "eth0", "egress"},
		{"ip", "-d", "link"},
	} {
		seen.WriteString(l.Run(t, "n1", argv...))
	}
	// Helper processes, past the program's own name (commlab injector-helper).
	for _, p := range tagged(ids[4]) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.PID))
		if args := strings.Split(string(b), "\x00"); len(args) > 2 {
			seen.WriteString(strings.Join(args[2:], " "))
		}
	}
	got := strings.ToLower(seen.String())
	for _, id := range ids[:2] { // the nftables chains; tc objects carry the shared handle c2: or priority c1
		if !strings.Contains(got, id) {
			t.Errorf("fault %s cannot be found by its id in the listings", id)
		}
	}
	for _, word := range []string{"port-block", "port block", "loss", "roce", "nic-rate", "comment", "block", "inject", "delay", "jitter", "netem", "wire"} {
		if strings.Contains(got, word) {
			i := strings.Index(got, word)
			t.Errorf("a learner's listing names %q: ...%s...", word, got[max(0, i-80):min(len(got), i+80)])
		}
	}
}
