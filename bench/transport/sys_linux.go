package transport

import "golang.org/x/sys/unix"

// raiseSockBufs asks for 8 MiB socket buffers, past net.core.*mem_max when
// privileged (SO_*BUFFORCE), as NCCL's IB emulation wants deep queues.
func raiseSockBufs(fd int) {
	for _, o := range [][2]int{{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}, {unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}} {
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[0], 8<<20) != nil {
			unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[1], 8<<20)
		}
	}
}

// allocate reserves size bytes for f's pages now, so a full /dev/shm fails
// here (as NCCL's posix_fallocate does) rather than with SIGBUS later.
func allocate(fd int, size int64) error { return unix.Fallocate(fd, 0, 0, size) }
