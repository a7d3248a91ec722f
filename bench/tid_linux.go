package bench

import "syscall"

// gettid is the calling thread's id, as NCCL prints it.
func gettid() int { return syscall.Gettid() }
