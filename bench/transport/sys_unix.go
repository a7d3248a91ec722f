//go:build unix

package transport

import "golang.org/x/sys/unix"

// The host calls the transports make; off unix (sys_other.go) they refuse
// with labs.ErrNeedsLinux. raiseSockBufs and allocate differ between Linux
// (sys_linux.go) and other unix systems (sys_nonlinux.go).

// roceSocket gives a socket of the RoCE emulation deep buffers and, if it is bound to
// the RoCE port itself (shared), lets it share that port with the node's other queue
// pairs (SO_REUSEADDR, SO_REUSEPORT). A socket on an ephemeral port must not: with
// SO_REUSEPORT, binding port 0 may return a port another such socket holds (20 of
// 1000 binds here), and the two then take each other's datagrams, which looked like
// loss (retries, then a hang until the watchdog).
func roceSocket(fd int, shared bool) error {
	if shared {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
			return err
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
			return err
		}
	}
	raiseSockBufs(fd)
	return nil
}

// monoNanos is CLOCK_MONOTONIC, which every process of a host shares (network
// namespaces do not change it): one-way delays between lab nodes are exact. Across
// hosts the clocks differ by a constant, which the base one-way delay absorbs.
func monoNanos() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// mapShared maps size bytes of the file fd, shared with the other processes
// that map it.
func mapShared(fd, size int) ([]byte, error) {
	return unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
}

// unmap undoes mapShared.
func unmap(mem []byte) { _ = unix.Munmap(mem) }
