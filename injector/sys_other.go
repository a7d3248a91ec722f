//go:build !unix

package injector

import (
	"os"
	"syscall"

	"github.com/commlab/commlab/labs"
)

func lockFile(*os.File) error { return labs.ErrNeedsLinux }

func unlockFile(*os.File) {}

func fstat(int) (uint64, int64, error) { return 0, 0, labs.ErrNeedsLinux }

func kill(int, syscall.Signal) error { return labs.ErrNeedsLinux }

func newSession() *syscall.SysProcAttr { return nil }
