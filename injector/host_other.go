//go:build !linux

package injector

import (
	"context"

	"github.com/commlab/commlab/labs"
)

// Off Linux the kinds still parse and validate (content checks, debriefs), but
// nothing touches the host: the probe finds nothing and every Apply and Revert
// refuses with labs.ErrNeedsLinux.

func probe(context.Context) Features {
	return Features{Notes: map[string]string{"host": labs.ErrNeedsLinux.Error()}}
}

func removeStaleProbes() {}

func (f *Loss) Apply(context.Context, Target, *Op) (Undo, error) { return nil, labs.ErrNeedsLinux }
func (f *PortBlock) Apply(context.Context, Target, *Op) (Undo, error) {
	return nil, labs.ErrNeedsLinux
}
func (f *RoCEDrop) Apply(context.Context, Target, *Op) (Undo, error) {
	return nil, labs.ErrNeedsLinux
}
func (u *nftUndo) Revert(context.Context) error { return labs.ErrNeedsLinux }
