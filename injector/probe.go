package injector

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
)

// Features is what this host offers to lab sandboxes (labs/netns) and fault
// kinds, found by trying each one in a scratch namespace (cl-probe-...) rather
// than by reading kernel configs. This is commlab's one feature probe.
type Features struct {
	// Veth, Bridge and NftBridge are what labs/netns builds sandboxes with.
	Veth      bool `json:"veth"`
	Bridge    bool `json:"bridge"`
	NftBridge bool `json:"nft_bridge"`
	TBF       bool `json:"tbf"`
	HTB       bool `json:"htb"`
	Netem     bool `json:"netem"`
	IFB       bool `json:"ifb"`
	Mirred    bool `json:"mirred"` // clsact + u32 + mirred redirect (ingress shaping)
	Nftables  bool `json:"nftables"`
	// Cgroup is "v1", "v2", "hybrid" (v1 controllers plus an empty v2 mount) or "".
	Cgroup string `json:"cgroup"`
	// Tools maps tool names (iperf3, unshare, nsenter, ip, mount) to their paths.
	Tools map[string]string `json:"tools"`
	// Notes explain each missing feature.
	Notes map[string]string `json:"notes,omitempty"`
}

// Has reports whether need is available, as an ErrUnsupported error that says
// what is missing and what to do.
func (f Features) Has(need Feature) error {
	miss := func(what string) error {
		if n := f.Notes[string(need)]; n != "" {
			what += " (" + n + ")"
		}
		return fmt.Errorf("%w: %s", ErrUnsupported, what)
	}
	switch need {
	case NeedTBF:
		if !f.TBF {
			return miss("this kernel has no tbf qdisc (sch_tbf)")
		}
	case NeedNetem:
		if !f.Netem {
			return miss("this kernel has no sch_netem, so delay and jitter cannot be emulated here (corrupt uses tc BPF); the lab needs a host whose kernel has CONFIG_NET_SCH_NETEM")
		}
	case NeedIFB:
		if !f.IFB || !f.Mirred {
			return miss("this kernel cannot redirect ingress to an ifb device (ifb, clsact, u32, mirred)")
		}
	case NeedNftables:
		if !f.Nftables {
			return miss("nftables is not usable here")
		}
	case NeedIperf3:
		if f.Tools["iperf3"] == "" {
			return miss("iperf3 is not installed")
		}
	case NeedUnshare:
		if f.Tools["unshare"] == "" || f.Tools["mount"] == "" {
			return miss("unshare and mount (util-linux) are not installed")
		}
	case NeedCgroup:
		if f.Cgroup == "" {
			return miss("no cgroup hierarchy with cpu, cpuset and memory controllers is mounted")
		}
	default:
		return fmt.Errorf("%w: unknown feature %q", ErrUnsupported, need)
	}
	return nil
}

// Missing lists the features that are absent, sorted.
func (f Features) Missing() []string {
	var out []string
	for _, n := range []Feature{NeedTBF, NeedNetem, NeedIFB, NeedNftables, NeedIperf3, NeedUnshare, NeedCgroup} {
		if f.Has(n) != nil {
			out = append(out, string(n))
		}
	}
	sort.Strings(out)
	return out
}

var (
	probeOnce sync.Once
	probed    Features
)

// Probe finds what this host supports. It runs once per process (about 50 ms,
// root needed for the network part) and caches the answer.
func Probe(ctx context.Context) Features {
	probeOnce.Do(func() { probed = probe(ctx); netemProbed.Store(probed.Netem) })
	return probed
}

// netemProbed is Features.Netem once a probe ran (false before): for printing a
// command, which must not run a probe.
var netemProbed atomic.Bool
