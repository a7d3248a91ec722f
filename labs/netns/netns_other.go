//go:build !linux

package netns

import (
	"context"

	"github.com/commlab/commlab/labs"
	"github.com/commlab/commlab/labs/topology"
)

// Off Linux there are no sandboxes: New and Open refuse with
// labs.ErrNeedsLinux, so no Sandbox value ever exists, and sweeping finds
// nothing to remove.

// Sandbox is a lab cluster; off Linux none can be built.
type Sandbox struct{}

// New refuses: sandboxes need Linux.
func New(*topology.Topology, Options) (*Sandbox, error) { return nil, labs.ErrNeedsLinux }

// Open refuses: sandboxes need Linux.
func Open(string, string) (*Sandbox, error) { return nil, labs.ErrNeedsLinux }

// Sweep finds nothing to remove.
func Sweep(context.Context, string) ([]string, error) { return nil, nil }

// SweepWith finds nothing to remove.
func SweepWith(context.Context, string, SweepOptions) ([]string, error) { return nil, nil }

func hostRAM() int64 { return 0 }
