//go:build !linux

package injector

import (
	"context"
	"io"
	"time"

	"github.com/commlab/commlab/labs"
)

// Off Linux the kinds still parse, validate and print their commands (content
// checks, debriefs), but nothing touches the host: the probe finds nothing, and
// resolving a target, every Apply and every Revert refuse with labs.ErrNeedsLinux.

func probe(context.Context) Features {
	return Features{Notes: map[string]string{"host": labs.ErrNeedsLinux.Error()}}
}

func removeStaleProbes() {}

func (t Target) resolve() (Target, error) { return t, labs.ErrNeedsLinux }

func checkNICs(Target, []string) error { return labs.ErrNeedsLinux }

func farEndOf(Target, string) (link, bool) { return link{}, false }

// RunHelper is commlab's helper process, which has nothing to run here.
func RunHelper(_ context.Context, _ []string, stderr io.Writer) int {
	_, _ = io.WriteString(stderr, labs.ErrNeedsLinux.Error()+"\n")
	return 2
}

func (*Congestion) Apply(context.Context, Target, *Op) (Undo, error)  { return nil, labs.ErrNeedsLinux }
func (*Corrupt) Apply(context.Context, Target, *Op) (Undo, error)     { return nil, labs.ErrNeedsLinux }
func (*Delay) Apply(context.Context, Target, *Op) (Undo, error)       { return nil, labs.ErrNeedsLinux }
func (*Jitter) Apply(context.Context, Target, *Op) (Undo, error)      { return nil, labs.ErrNeedsLinux }
func (*Loss) Apply(context.Context, Target, *Op) (Undo, error)        { return nil, labs.ErrNeedsLinux }
func (*MTUMismatch) Apply(context.Context, Target, *Op) (Undo, error) { return nil, labs.ErrNeedsLinux }
func (*NICDown) Apply(context.Context, Target, *Op) (Undo, error)     { return nil, labs.ErrNeedsLinux }
func (*NICFlap) Apply(context.Context, Target, *Op) (Undo, error)     { return nil, labs.ErrNeedsLinux }
func (*NICRate) Apply(context.Context, Target, *Op) (Undo, error)     { return nil, labs.ErrNeedsLinux }
func (*PortBlock) Apply(context.Context, Target, *Op) (Undo, error)   { return nil, labs.ErrNeedsLinux }
func (*RoCEDrop) Apply(context.Context, Target, *Op) (Undo, error)    { return nil, labs.ErrNeedsLinux }
func (*WrongRoute) Apply(context.Context, Target, *Op) (Undo, error)  { return nil, labs.ErrNeedsLinux }

func (*corruptUndo) Revert(context.Context) error   { return labs.ErrNeedsLinux }
func (*delayUndo) Revert(context.Context) error     { return labs.ErrNeedsLinux }
func (*wireUndo) Revert(context.Context) error      { return labs.ErrNeedsLinux }
func (*linkStateUndo) Revert(context.Context) error { return labs.ErrNeedsLinux }
func (*mntnsUndo) Revert(context.Context) error     { return labs.ErrNeedsLinux }
func (*mtuUndo) Revert(context.Context) error       { return labs.ErrNeedsLinux }
func (*nftUndo) Revert(context.Context) error       { return labs.ErrNeedsLinux }
func (*lossUndo) Revert(context.Context) error      { return labs.ErrNeedsLinux }
func (*nicRateUndo) Revert(context.Context) error   { return labs.ErrNeedsLinux }
func (*routeUndo) Revert(context.Context) error     { return labs.ErrNeedsLinux }

// Delivered needs nftables.
func Delivered(context.Context, Target, string, string, PortRange, time.Duration) ([]float64, error) {
	return nil, labs.ErrNeedsLinux
}
