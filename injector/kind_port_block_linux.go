//go:build linux

package injector

import (
	"context"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Apply implements Fault.
func (f *PortBlock) Apply(ctx context.Context, t Target, op *Op) (Undo, error) {
	rule := func(in bool) []expr.Any {
		var r []expr.Any
		if f.NIC != "" {
			r = matchIfname(in, f.NIC)
		} else {
			r = notLoopback(in)
		}
		r = append(r, matchL4(unix.IPPROTO_TCP, f.Ports)...)
		return append(r, drop()...)
	}
	var chains []nftChain
	if f.Direction.In() {
		chains = append(chains, nftChain{name: op.ID + "-in", hook: nftables.ChainHookInput, rules: [][]expr.Any{rule(true)}})
	}
	if f.Direction.Out() {
		chains = append(chains, nftChain{name: op.ID + "-out", hook: nftables.ChainHookOutput, rules: [][]expr.Any{rule(false)}})
	}
	return applyNft(ctx, t, op, "inet", chains)
}

// notLoopback matches packets whose input (or output) interface is not lo, so a
// node's own processes can still talk to themselves.
func notLoopback(in bool) []expr.Any {
	r := matchIfname(in, "lo")
	r[1].(*expr.Cmp).Op = expr.CmpOpNeq
	return r
}
