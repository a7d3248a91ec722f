//go:build unix

package bench

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// The host calls bench makes; off unix (sys_other.go) they refuse with
// labs.ErrNeedsLinux.

// writable says whether this process may create files in dir.
func writable(dir string) error { return unix.Access(dir, unix.W_OK) }

// ownGroup puts a started process in a process group of its own.
func ownGroup() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// selfUsage returns this process's CPU seconds (user, sys) and peak RSS as
// getrusage reports it (KiB on Linux).
func selfUsage() (user, sys, maxRSS float64) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()) / 1e9, float64(ru.Stime.Nano()) / 1e9, float64(ru.Maxrss)
}
