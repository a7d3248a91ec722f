//go:build unix

package slurm

import "syscall"

// ownGroup puts a started process in a process group of its own, which
// killGroup ends.
func ownGroup() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// killGroup sends sig to the process group led by pid.
func killGroup(pid int, sig syscall.Signal) error { return syscall.Kill(-pid, sig) }
