//go:build linux

package gpu

import (
	"bytes"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// KernelXids reads the kernel ring buffer (/dev/kmsg, without blocking) and
// returns the Xid lines in it. Reading it needs root or CAP_SYSLOG.
func KernelXids() ([]XidEvent, error) {
	fd, err := unix.Open("/dev/kmsg", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/kmsg: %w", err)
	}
	defer unix.Close(fd)
	var all bytes.Buffer
	buf := make([]byte, 8192)
	for {
		n, err := unix.Read(fd, buf)
		switch {
		case errors.Is(err, unix.EAGAIN):
			return ScanKernelXids(&all)
		case errors.Is(err, unix.EPIPE):
			// A record was overwritten while reading: skip it.
			continue
		case err != nil:
			return nil, fmt.Errorf("read /dev/kmsg: %w", err)
		case n == 0:
			return ScanKernelXids(&all)
		}
		// A record is "prio,seq,usec,flags;message\n": keep the message.
		rec := buf[:n]
		if i := bytes.IndexByte(rec, ';'); i >= 0 {
			rec = rec[i+1:]
		}
		all.Write(rec)
		if len(rec) == 0 || rec[len(rec)-1] != '\n' {
			all.WriteByte('\n')
		}
	}
}
