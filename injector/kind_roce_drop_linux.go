//go:build linux

package injector

import (
	"context"
)

// Apply implements Fault.
func (f *RoCEDrop) Apply(ctx context.Context, t Target, op *Op) (Undo, error) {
	return applyNetdevDrop(ctx, t, op, f.NIC, f.Direction, true, uint32(f.Percent))
}
