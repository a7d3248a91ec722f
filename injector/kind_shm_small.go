package injector

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// mntnsDir holds the mount namespaces commlab keeps for nodes (shm-small).
var mntnsDir = filepath.Join(runDir, "mntns")

// ShmSmall gives the node's workloads a tiny /dev/shm, so NCCL's shared-memory
// transport fails to allocate its segments ("Bus error", "No space left on
// device"). Nodes of the netns backend share the host's mounts, so the tiny
// tmpfs lives in a mount namespace of the node's own, kept at
// /run/commlab/mntns/<netns>; workloads enter it through ShmNamespace.
type ShmSmall struct {
	Size Size `json:"size" param:"size" doc:"size of the node's /dev/shm, 4KiB to 1GiB"`
}

var _ Fault = (*ShmSmall)(nil)

// ShmSmallKind registers shm-small.
func ShmSmallKind() Kind {
	return Kind{Name: "shm-small", Summary: "give the node's workloads a tiny /dev/shm",
		Needs: []Feature{NeedUnshare},
		New:   func() Fault { return &ShmSmall{Size: 1 << 20} }, NewUndo: func() Undo { return &mntnsUndo{} }}
}

// Kind implements Fault.
func (f *ShmSmall) Kind() string { return "shm-small" }

// Validate implements Fault.
func (f *ShmSmall) Validate() error {
	if f.Size < 4<<10 || f.Size > 1<<30 {
		return invalid("size %s: want 4KiB to 1GiB", f.Size)
	}
	return nil
}

func (f *ShmSmall) claims() []string { return []string{"shm"} }

// Command implements Fault.
func (f *ShmSmall) Command(Target) []string {
	return []string{fmt.Sprintf("mount -t tmpfs -o size=%d,mode=1777,nosuid,nodev tmpfs /dev/shm", uint64(f.Size))}
}

// Apply implements Fault.
func (f *ShmSmall) Apply(ctx context.Context, t Target, op *Op) (Undo, error) {
	unshare, err := lookTool("unshare")
	if err != nil {
		return nil, err
	}
	mount, err := lookTool("mount")
	if err != nil {
		return nil, err
	}
	file := filepath.Join(mntnsDir, t.netnsName())
	if _, err := os.Lstat(file); err == nil {
		return nil, fmt.Errorf("%w: %s exists already", ErrConflict, file)
	}
	if err := os.MkdirAll(mntnsDir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", mntnsDir, err)
	}
	u := &mntnsUndo{File: file, BootID: bootID()}
	if err := op.Record(u); err != nil {
		return nil, err
	}
	if err := os.WriteFile(file, nil, 0o444); err != nil {
		return u, fmt.Errorf("create %s: %w", file, err)
	}
	opts := fmt.Sprintf("size=%d,mode=1777,nosuid,nodev", uint64(f.Size))
	cmd := exec.CommandContext(ctx, unshare, "--mount="+file, "--propagation", "private", mount, "-t", "tmpfs", "-o", opts, "tmpfs", "/dev/shm")
	if out, err := cmd.CombinedOutput(); err != nil {
		return u, fmt.Errorf("mount a %s /dev/shm in a new mount namespace: %w: %s", f.Size, err, strings.TrimSpace(string(out)))
	}
	size, err := shmSize(ctx, file)
	if err != nil {
		return u, err
	}
	if size != uint64(f.Size) {
		return u, fmt.Errorf("read back: /dev/shm in %s is %d bytes, asked %d", file, size, uint64(f.Size))
	}
	return u, nil
}

// shmSize measures /dev/shm inside the mount namespace file (stat -f).
func shmSize(ctx context.Context, file string) (uint64, error) {
	nsenter, err := lookTool("nsenter")
	if err != nil {
		return 0, err
	}
	out, err := exec.CommandContext(ctx, nsenter, "--mount="+file, "stat", "-f", "-c", "%T %b %S", "/dev/shm").Output()
	if err != nil {
		return 0, fmt.Errorf("read back /dev/shm in %s: %w", file, err)
	}
	f := strings.Fields(string(out))
	if len(f) != 3 || f[0] != "tmpfs" {
		return 0, fmt.Errorf("read back /dev/shm in %s: unexpected %q", file, out)
	}
	blocks, _ := strconv.ParseUint(f[1], 10, 64)
	bsize, _ := strconv.ParseUint(f[2], 10, 64)
	return blocks * bsize, nil
}

// mntnsUndo releases the node's mount namespace (and with it the tiny /dev/shm;
// workloads still inside keep it until they exit).
type mntnsUndo struct {
	File   string `json:"file"`
	BootID string `json:"boot_id"`
}
