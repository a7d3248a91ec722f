//go:build unix && !linux

package transport

import "golang.org/x/sys/unix"

// raiseSockBufs asks for 8 MiB socket buffers within the system's limits.
func raiseSockBufs(fd int) {
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 8<<20)
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 8<<20)
}

// allocate sizes the file; without fallocate a full disk shows only on use.
func allocate(fd int, size int64) error { return unix.Ftruncate(fd, size) }
