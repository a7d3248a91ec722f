//go:build unix

package slurm

import (
	"os"
	"syscall"
)

// ownGroup puts a started process in a process group of its own, which
// killGroup ends.
func ownGroup() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// killGroup sends sig to the process group led by pid.
func killGroup(pid int, sig syscall.Signal) error { return syscall.Kill(-pid, sig) }

// dupFile is a copy of f's descriptor, which stays open when f is closed.
func dupFile(f *os.File) (*os.File, error) {
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		return nil, err
	}
	syscall.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), f.Name()), nil
}
