//go:build !linux

package slurm

import (
	"os"
	"os/exec"

	"github.com/commlab/commlab/labs"
)

func createNodeNS(string) error { return labs.ErrNeedsLinux }

func (a *Agent) learnerInit(bool, ...string) (*exec.Cmd, *os.File, error) {
	return nil, nil, labs.ErrNeedsLinux
}
