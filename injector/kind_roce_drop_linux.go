//go:build linux

package injector

import (
	"context"

	"golang.org/x/sys/unix"
)

// Apply implements Fault.
func (f *RoCEDrop) Apply(ctx context.Context, t Target, op *Op) (Undo, error) {
	match := matchL4(unix.IPPROTO_UDP, PortRange{roceV2Port, roceV2Port})
	return applyNetdevDrop(ctx, t, op, f.NIC, f.Direction, match, uint32(f.Percent))
}
