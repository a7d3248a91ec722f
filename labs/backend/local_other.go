//go:build !linux

package backend

import (
	"context"
	"time"

	"github.com/commlab/commlab/labs"
	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/scenarios"
)

// hostCheck refuses every lab: sandboxes need Linux.
func hostCheck() error { return labs.ErrNeedsLinux }

// Up implements session.Provider; Check has refused already.
func (p Local) Up(context.Context, scenarios.Environment, time.Duration, func(session.Progress)) (session.Env, error) {
	return nil, labs.ErrNeedsLinux
}
