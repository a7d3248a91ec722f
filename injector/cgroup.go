package injector

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/commlab/commlab/internal/host"
	"github.com/commlab/commlab/labs/cgroup"
)

// The cgroups themselves (layout, paths, moving processes) are labs/cgroup's;
// this file keeps what is the injector's own: journaled writes of control files.

// cgMode is the host's cgroup layout ("v2", "hybrid", "v1"), or "" when the
// controllers faults change (cpu, cpuset, memory) are not all there.
func cgMode() string {
	if !cgroup.HasControllers("cpu", "cpuset", "memory") {
		return ""
	}
	return cgroup.Mode()
}

// cgroupPath is the directory of cgroup cg for controller ctrl.
func cgroupPath(ctrl, cg string) string { return cgroup.Dir(ctrl, cg) }

// cgroupAddProc moves pid, a fault's own load, into cg in every hierarchy where
// cg exists: into its workload leaf if it has one (the labs layout, where on
// cgroup v2 the node's group itself can hold no process), beside the lab's ranks.
func cgroupAddProc(cg string, pid int) error {
	if err := validCgroup(cg); err != nil {
		return err
	}
	if leaf := path.Join(cg, host.WorkloadLeaf); exists(cgroup.Dir("cpu", leaf)) {
		cg = leaf
	}
	return cgroup.Move(cg, pid)
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// cgFile is one cgroup control file a fault changes.
type cgFile struct {
	Path  string `json:"path"`
	Prior string `json:"prior"`
	Value string `json:"value"`
}

// safeCgroupFile refuses paths outside commlab's cgroups (a damaged journal must
// not make the revert write elsewhere).
func safeCgroupFile(p string) error {
	if filepath.Clean(p) != p || !strings.HasPrefix(p, cgroup.MountRoot+"/") || !strings.Contains(p, "/"+cgroup.Root+"/") || strings.Contains(p, "..") {
		return fmt.Errorf("refusing cgroup file %q: not under a commlab/ cgroup", p)
	}
	return nil
}

func readCgroupFile(p string) (string, error) {
	if err := safeCgroupFile(p); err != nil {
		return "", err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", p, err)
	}
	return strings.TrimSpace(string(b)), nil
}

func writeCgroupFile(p, v string) error {
	if err := safeCgroupFile(p); err != nil {
		return err
	}
	if err := os.WriteFile(p, []byte(v), 0); err != nil {
		return fmt.Errorf("write %q to %s: %w", v, p, err)
	}
	return nil
}

// cgroupUndo writes back the prior value of each changed file, last first.
type cgroupUndo struct {
	Cgroup string   `json:"cgroup"`
	BootID string   `json:"boot_id"`
	Files  []cgFile `json:"files"`
}

// Revert implements Undo. A cgroup that is gone (or from another boot) is fine.
func (u *cgroupUndo) Revert(ctx context.Context) error {
	if !sameBoot(u.BootID) {
		return nil
	}
	for i := len(u.Files) - 1; i >= 0; i-- {
		f := u.Files[i]
		if err := safeCgroupFile(f.Path); err != nil {
			return err
		}
		if _, err := os.Stat(f.Path); errors.Is(err, os.ErrNotExist) {
			continue
		}
		cur, err := readCgroupFile(f.Path)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return err
		}
		if cur == f.Prior {
			continue
		}
		if err := writeCgroupFile(f.Path, f.Prior); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return ctx.Err()
}

// applyCgroupFiles journals the prior values of files, then writes the new ones.
func applyCgroupFiles(t Target, op *Op, files []cgFile) (Undo, error) {
	u := &cgroupUndo{Cgroup: t.Cgroup, BootID: bootID()}
	for _, f := range files {
		prior, err := readCgroupFile(f.Path)
		if err != nil {
			return nil, fmt.Errorf("cgroup %s: %w", t.Cgroup, err)
		}
		f.Prior = prior
		u.Files = append(u.Files, f)
	}
	if err := op.Record(u); err != nil {
		return nil, err
	}
	for _, f := range u.Files {
		if err := writeCgroupFile(f.Path, f.Value); err != nil {
			return u, err
		}
	}
	return u, nil
}

// applyChecked applies files as applyCgroupFiles does, then reads them back.
func applyChecked(ctx context.Context, t Target, op *Op, files []cgFile) (Undo, error) {
	u, err := applyCgroupFiles(t, op, files)
	if err != nil {
		return u, err
	}
	if err := readBack(files); err != nil {
		return u, err
	}
	return u, ctx.Err()
}

// readBack checks that each file holds what was written; the kernel rewrites CPU and
// memory-node lists ("0,1" as "0-1"), so cpuset files are compared by their members.
func readBack(files []cgFile) error {
	for _, f := range files {
		got, err := readCgroupFile(f.Path)
		if err != nil {
			return err
		}
		if got != f.Value && !(strings.Contains(filepath.Base(f.Path), "cpuset.") && expandSame(got, f.Value)) {
			return fmt.Errorf("read back %s: %q, wrote %q", f.Path, got, f.Value)
		}
	}
	return nil
}

// needCgroup checks that t names an existing workload cgroup.
func needCgroup(t Target, ctrl string) (string, error) {
	if t.Cgroup == "" {
		return "", invalid("node %s has no workload cgroup (the lab must set the target's cgroup, under commlab/)", t)
	}
	if err := validCgroup(t.Cgroup); err != nil {
		return "", err
	}
	if cgMode() == "" {
		return "", fmt.Errorf("%w: no cgroup hierarchy is mounted", ErrUnsupported)
	}
	dir := cgroupPath(ctrl, t.Cgroup)
	if _, err := os.Stat(dir); err != nil {
		return "", invalid("node %s: cgroup %s does not exist (%v)", t, dir, err)
	}
	return dir, nil
}
