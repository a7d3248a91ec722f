//go:build linux

package injector

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// resolve checks that the namespace exists, is not the host's own, and records its
// inode and the boot id.
func (t Target) resolve() (Target, error) {
	if err := t.Validate(); err != nil {
		return t, err
	}
	var st unix.Stat_t
	if err := unix.Stat(t.netnsPath(), &st); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return t, invalid("node %s: namespace %s does not exist", t, t.netnsPath())
		}
		return t, fmt.Errorf("node %s: stat %s: %w", t, t.netnsPath(), err)
	}
	var self unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &self); err != nil {
		return t, fmt.Errorf("stat own netns: %w", err)
	}
	if st.Ino == self.Ino && st.Dev == self.Dev {
		return t, invalid("node %s: %s is the host's own namespace; commlab never faults host interfaces", t, t.netnsPath())
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(t.netnsPath(), &fs); err != nil || fs.Type != unix.NSFS_MAGIC {
		return t, invalid("node %s: %s is not a mounted network namespace", t, t.netnsPath())
	}
	t.NetNSInode = st.Ino
	t.BootID = bootID()
	return t, nil
}
