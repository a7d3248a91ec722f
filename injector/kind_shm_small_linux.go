//go:build linux

package injector

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ShmNamespace returns the mount namespace file the workloads of node t must
// enter (nsenter --mount=<file>) while a shm-small fault is active there, and
// whether there is one.
func ShmNamespace(t Target) (string, bool) {
	p := filepath.Join(mntnsDir, t.netnsName())
	var fs unix.Statfs_t
	if err := unix.Statfs(p, &fs); err != nil || fs.Type != unix.NSFS_MAGIC {
		return "", false
	}
	return p, true
}

// Revert implements Undo.
func (u *mntnsUndo) Revert(ctx context.Context) error {
	if filepath.Dir(u.File) != mntnsDir || validNetNS(filepath.Base(u.File)) != nil {
		return fmt.Errorf("refusing to unmount %q: not a commlab mount namespace", u.File)
	}
	if err := unix.Unmount(u.File, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount %s: %w", u.File, err)
	}
	if err := os.Remove(u.File); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", u.File, err)
	}
	return ctx.Err()
}
