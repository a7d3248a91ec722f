//go:build linux

package netns

import "golang.org/x/sys/unix"

// hostRAM is the host's memory in bytes, 0 if unknown.
func hostRAM() int64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}
