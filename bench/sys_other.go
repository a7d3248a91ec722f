//go:build !unix

package bench

import (
	"syscall"

	"github.com/commlab/commlab/labs"
)

func writable(string) error { return labs.ErrNeedsLinux }

func ownGroup() *syscall.SysProcAttr { return nil }

func selfUsage() (user, sys, maxRSS float64) { return 0, 0, 0 }
