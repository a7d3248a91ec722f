//go:build unix

package injector

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// The few host calls generic injector code makes; off unix (sys_other.go)
// each refuses with labs.ErrNeedsLinux.

// lockFile takes an exclusive lock on f, shared across processes.
func lockFile(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// unlockFile releases lockFile's lock.
func unlockFile(f *os.File) { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN) }

// fstat returns the inode and size of the open file fd.
func fstat(fd int) (ino uint64, size int64, err error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, 0, err
	}
	return uint64(st.Ino), st.Size, nil
}

// kill sends sig to pid.
func kill(pid int, sig syscall.Signal) error { return unix.Kill(pid, sig) }

// newSession makes a started process the leader of a session of its own.
func newSession() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }
