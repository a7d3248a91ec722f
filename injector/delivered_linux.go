//go:build linux

package injector

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Delivered measures, for d, what t's node accepts for local delivery of proto
// (tcp or udp) packets to each port of ports, in bit/s, one figure per port: a
// counter per port in an input chain that runs after every filter chain (priority
// 1000), so a packet some other chain drops is not counted. The chain is named by
// the caller's id and removed afterwards.
func Delivered(ctx context.Context, t Target, id, proto string, ports PortRange, d time.Duration) ([]float64, error) {
	l4 := map[string]uint8{"tcp": unix.IPPROTO_TCP, "udp": unix.IPPROTO_UDP}[proto]
	if l4 == 0 || ports.Lo == 0 || ports.Hi < ports.Lo {
		return nil, invalid("delivered: want tcp or udp and a port range, got %s %d-%d", proto, ports.Lo, ports.Hi)
	}
	var rules [][]expr.Any
	for p := ports.Lo; p <= ports.Hi && p != 0; p++ {
		rules = append(rules, append(matchL4(l4, PortRange{p, p}), &expr.Counter{}))
	}
	fam := nftables.TableFamilyINet
	chain := nftChain{name: id, hook: nftables.ChainHookInput, rules: rules, priority: nftables.ChainPriorityRef(1000)}
	if err := nftAdd(t, fam, []nftChain{chain}); err != nil {
		return nil, err
	}
	defer func() { _ = nftDel(t, fam, []string{id}) }()
	start, err := nftCounters(t, fam, id)
	if err != nil {
		return nil, err
	}
	began := time.Now()
	if !sleepCtx(ctx, d) {
		return nil, ctx.Err()
	}
	end, err := nftCounters(t, fam, id)
	if err != nil {
		return nil, err
	}
	secs := time.Since(began).Seconds()
	if len(end) != len(start) || len(end) != len(rules) {
		return nil, fmt.Errorf("read back: %d counters in chain %s of %s, want %d", len(end), id, t.netnsName(), len(rules))
	}
	out := make([]float64, len(end))
	for i := range end {
		out[i] = math.Max(0, float64(end[i]-start[i])*8/secs)
	}
	return out, nil
}

// nftCounters reads the byte counters of chain name in the sandbox's table, in rule order.
func nftCounters(t Target, fam nftables.TableFamily, name string) ([]uint64, error) {
	var out []uint64
	err := withHostLock("nft", func() error {
		c, release, err := nftConn(t)
		if err != nil {
			return err
		}
		failed := true
		defer func() { release(failed) }()
		rules, err := c.GetRules(nftTable(t.Sandbox, fam), &nftables.Chain{Name: name})
		if err != nil {
			return fmt.Errorf("read nftables counters of %s in %s: %w", name, t.netnsName(), err)
		}
		for _, r := range rules {
			for _, e := range r.Exprs {
				if c, ok := e.(*expr.Counter); ok {
					out = append(out, c.Bytes)
				}
			}
		}
		failed = false
		return nil
	})
	return out, err
}
