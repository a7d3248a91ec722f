//go:build !unix

package slurm

import (
	"os"
	"syscall"

	"github.com/commlab/commlab/labs"
)

func ownGroup() *syscall.SysProcAttr { return nil }

func killGroup(int, syscall.Signal) error { return labs.ErrNeedsLinux }

func dupFile(*os.File) (*os.File, error) { return nil, labs.ErrNeedsLinux }
