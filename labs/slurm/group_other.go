//go:build !unix

package slurm

import (
	"syscall"

	"github.com/commlab/commlab/labs"
)

func ownGroup() *syscall.SysProcAttr { return nil }

func killGroup(int, syscall.Signal) error { return labs.ErrNeedsLinux }
