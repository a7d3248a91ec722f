//go:build linux

package cgroup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/cgroups/v3"
	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// v1Controllers are the hierarchies a v1 sandbox uses.
var v1Controllers = []cgroup1.Name{cgroup1.Pids, cgroup1.Memory, cgroup1.Cpu}

// Unified reports whether the host uses the cgroup v2 tree (true) or v1
// controllers (false, also on hybrid hosts, where the v2 tree has no controllers).
func Unified() bool { return cgroups.Mode() == cgroups.Unified }

// Mode names the host's cgroup layout: "v2", "hybrid" or "v1".
func Mode() string {
	switch cgroups.Mode() {
	case cgroups.Unified:
		return "v2"
	case cgroups.Hybrid:
		return "hybrid"
	case cgroups.Legacy:
		return "v1"
	}
	return "unavailable"
}

// v1All are the v1 hierarchies a process is moved in (Move) and a fault may
// change (cpuset, cpuacct): a superset of v1Controllers.
var v1All = []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "freezer"}

// Dir is the directory of the cgroup at rel for controller ctrl: the unified
// tree on v2, ctrl's own hierarchy on v1 and hybrid hosts.
func Dir(ctrl, rel string) string {
	if Unified() {
		return filepath.Join(MountRoot, rel)
	}
	return filepath.Join(MountRoot, ctrl, rel)
}

// HasControllers reports whether the host offers ctrls: in the unified tree on
// v2, as mounted hierarchies on v1 and hybrid hosts.
func HasControllers(ctrls ...string) bool {
	switch cgroups.Mode() {
	case cgroups.Unavailable:
		return false
	case cgroups.Unified:
		b, err := os.ReadFile(filepath.Join(MountRoot, "cgroup.controllers"))
		if err != nil {
			return false
		}
		for _, c := range ctrls {
			if !slices.Contains(strings.Fields(string(b)), c) {
				return false
			}
		}
		return true
	}
	for _, c := range ctrls {
		if _, err := os.Stat(filepath.Join(MountRoot, c, "cgroup.procs")); err != nil {
			return false
		}
	}
	return true
}

// Move moves the running process pid into the cgroup at rel, in every hierarchy
// where rel exists (a process that already ended is not an error). Processes
// commlab starts enter their group at birth instead (Group.Prepare).
func Move(rel string, pid int) error {
	if err := CheckPath(rel); err != nil {
		return err
	}
	dirs := []string{filepath.Join(MountRoot, rel)}
	if !Unified() {
		dirs = dirs[:0]
		for _, c := range v1All {
			dirs = append(dirs, filepath.Join(MountRoot, c, rel))
		}
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); err != nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("move %d into %s: %w", pid, d, err)
		}
	}
	return nil
}

// Open returns the group at rel without creating it.
func Open(rel string) (*Group, error) {
	if err := CheckPath(rel); err != nil {
		return nil, err
	}
	if cgroups.Mode() == cgroups.Unavailable {
		return nil, errors.New("no cgroup hierarchy is mounted")
	}
	return &Group{rel: rel, v2: Unified()}, nil
}

// New creates the group at rel with limits l (an existing group is reused and
// its limits rewritten).
func New(rel string, l Limits) (*Group, error) {
	g, err := Open(rel)
	if err != nil {
		return nil, err
	}
	// A concurrent teardown may remove the shared commlab/ parent between our
	// mkdir of it and of rel; one retry settles that race.
	for attempt := 0; ; attempt++ {
		err = g.create(l)
		if err == nil || attempt == 2 || !errors.Is(err, os.ErrNotExist) {
			break
		}
	}
	if err != nil {
		_ = g.Destroy(context.Background())
		return nil, fmt.Errorf("create cgroup %s: %w", rel, err)
	}
	return g, nil
}

func (g *Group) create(l Limits) error {
	if g.v2 {
		r := &cgroup2.Resources{}
		if l.Pids > 0 {
			r.Pids = &cgroup2.Pids{Max: l.Pids}
		}
		if l.Memory > 0 {
			r.Memory = &cgroup2.Memory{Max: &l.Memory}
		}
		if l.CPUs > 0 || l.CPUWeight > 0 {
			r.CPU = &cgroup2.CPU{}
		}
		if l.CPUs > 0 {
			quota, period := cpuQuota(l.CPUs)
			r.CPU.Max = cgroup2.NewCPUMax(&quota, &period)
		}
		if l.CPUWeight > 0 {
			r.CPU.Weight = &l.CPUWeight
		}
		if err := enableControllers(g.rel); err != nil {
			return err
		}
		_, err := cgroup2.NewManager(MountRoot, "/"+g.rel, r)
		return err
	}
	r := &specs.LinuxResources{}
	if l.Pids > 0 {
		r.Pids = &specs.LinuxPids{Limit: &l.Pids}
	}
	if l.Memory > 0 {
		r.Memory = &specs.LinuxMemory{Limit: &l.Memory}
	}
	if l.CPUs > 0 || l.CPUWeight > 0 {
		r.CPU = &specs.LinuxCPU{}
	}
	if l.CPUs > 0 {
		quota, period := cpuQuota(l.CPUs)
		r.CPU.Quota, r.CPU.Period = &quota, &period
	}
	if l.CPUWeight > 0 {
		shares := V1Shares(l.CPUWeight)
		r.CPU.Shares = &shares
	}
	_, err := cgroup1.New(cgroup1.StaticPath("/"+g.rel), r, cgroup1.WithHierarchy(v1Hierarchy))
	return err
}

// labControllers are the v2 controllers a lab group needs: limits (memory, pids) and
// what faults write (cpu.max, cpuset.cpus, cpuset.mems).
var labControllers = []string{"cpu", "cpuset", "memory", "pids"}

// enableControllers creates rel's parents and enables labControllers in each one's
// cgroup.subtree_control, from the root down, so that rel gets their files. containerd
// enables only the controllers of the limits it sets, and a fault may need others.
// Controllers the kernel or a delegating parent does not offer are left out.
func enableControllers(rel string) error {
	dir := MountRoot
	for _, part := range strings.Split(path.Dir(rel), "/") {
		if err := enableIn(dir); err != nil {
			return err
		}
		dir = filepath.Join(dir, part)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
	}
	return enableIn(dir)
}

func enableIn(dir string) error {
	avail, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return err
	}
	on, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	var add []string
	for _, c := range labControllers {
		if slices.Contains(strings.Fields(string(avail)), c) && !slices.Contains(strings.Fields(string(on)), c) {
			add = append(add, "+"+c)
		}
	}
	if len(add) == 0 {
		return nil
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(strings.Join(add, " ")), 0o644); err != nil {
		return fmt.Errorf("enable %s in %s: %w", strings.Join(add, " "), dir, err)
	}
	return nil
}

func cpuQuota(cpus float64) (int64, uint64) {
	const period = 100000 // µs, the kernel's default
	return int64(cpus * period), period
}

// v1Hierarchy is containerd's default v1 hierarchy cut down to pids, memory, cpu.
func v1Hierarchy() ([]cgroup1.Subsystem, error) {
	all, err := cgroup1.Default()
	if err != nil {
		return nil, err
	}
	var out []cgroup1.Subsystem
	for _, s := range all {
		if slices.Contains(v1Controllers, s.Name()) {
			out = append(out, s)
		}
	}
	if len(out) != len(v1Controllers) {
		return nil, fmt.Errorf("cgroup v1: want controllers %v mounted under %s", v1Controllers, MountRoot)
	}
	return out, nil
}

// Child creates (or reuses) the group rel/name with limits l of its own, within
// its parent's.
func (g *Group) Child(name string, l Limits) (*Group, error) {
	return New(g.rel+"/"+name, l)
}

// SetCPUWeight rewrites the group's CPU weight (cpu.weight units, see
// Limits.CPUWeight; DefaultCPUWeight restores the kernel's default) and leaves
// its other limits as they are. It writes the one file in place: a group removed
// meanwhile is an error wrapping fs.ErrNotExist, never created again (containerd's
// Update would make its directory anew).
func (g *Group) SetCPUWeight(w uint64) error {
	if w < 1 || w > 10000 {
		return fmt.Errorf("cgroup %s: CPU weight %d: want 1 to 10000", g.rel, w)
	}
	file, val := filepath.Join(Dir("cpu", g.rel), "cpu.weight"), w
	if !g.v2 {
		file, val = filepath.Join(Dir("cpu", g.rel), "cpu.shares"), V1Shares(w)
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_TRUNC, 0)
	if err == nil {
		_, err = f.WriteString(strconv.FormatUint(val, 10))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("cgroup %s: set CPU weight %d: %w", g.rel, w, err)
	}
	return nil
}

// Sub returns the group rel/name without creating it.
func (g *Group) Sub(name string) (*Group, error) { return Open(g.rel + "/" + name) }

// Path is the group's path relative to each hierarchy root, e.g. "commlab/k3f9a2".
func (g *Group) Path() string { return g.rel }

// Dirs lists the group's directory in every hierarchy commlab uses.
func (g *Group) Dirs() []string {
	if g.v2 {
		return []string{filepath.Join(MountRoot, g.rel)}
	}
	out := make([]string, 0, len(v1Controllers))
	for _, c := range v1Controllers {
		out = append(out, filepath.Join(MountRoot, string(c), g.rel))
	}
	return out
}

// Exists reports whether the group has a directory in any hierarchy.
func (g *Group) Exists() bool {
	for _, d := range g.Dirs() {
		if _, err := os.Stat(d); err == nil {
			return true
		}
	}
	return false
}

// Placement puts one new process into a group; see [Group.Prepare].
type Placement struct {
	g     *Group
	procs []*os.File // v1: each hierarchy's cgroup.procs, opened before the caller changes mounts
	dir   *os.File   // v2: the group's directory, for CLONE_INTO_CGROUP
}

// Prepare sets attr so that a process started with it enters g before it
// runs a single instruction of its program: on v2 it is cloned straight into g
// (CLONE_INTO_CGROUP); on v1 it stops at its exec under ptrace and
// [Placement.Place] moves it. Start the process on an OS thread locked with
// runtime.LockOSThread and call Place on that same thread (the tracer), then
// Close. The files Place needs are opened here, so the thread may change its
// mount namespace in between.
//
// No thread of the caller ever joins g, so killing g never hits the caller.
func (g *Group) Prepare(attr *syscall.SysProcAttr) (*Placement, error) {
	p := &Placement{g: g}
	if g.v2 {
		f, err := os.Open(g.Dirs()[0])
		if err != nil {
			return nil, fmt.Errorf("open cgroup %s: %w", g.rel, err)
		}
		p.dir = f
		attr.UseCgroupFD = true
		attr.CgroupFD = int(f.Fd())
		return p, nil
	}
	for _, d := range g.Dirs() {
		f, err := os.OpenFile(filepath.Join(d, "cgroup.procs"), os.O_WRONLY, 0)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("open cgroup %s: %w", d, err)
		}
		p.procs = append(p.procs, f)
	}
	attr.Ptrace = true
	return p, nil
}

// Close releases the files Prepare opened.
func (p *Placement) Close() {
	for _, f := range p.procs {
		f.Close()
	}
	if p.dir != nil {
		p.dir.Close()
	}
}

// Place finishes what [Group.Prepare] started for the process pid: on v1 it
// waits for the exec stop, writes pid to every hierarchy's cgroup.procs and
// lets the process run. On failure the process is killed.
func (p *Placement) Place(pid int) error {
	if p.dir != nil {
		return nil
	}
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(pid, &ws, unix.WALL, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			_ = unix.Kill(pid, unix.SIGKILL)
			return fmt.Errorf("wait for process %d to stop at exec: %w", pid, err)
		}
		break
	}
	if !ws.Stopped() {
		return fmt.Errorf("process %d ended before it could join cgroup %s (status %#x)", pid, p.g.rel, uint32(ws))
	}
	b := []byte(strconv.Itoa(pid))
	for _, f := range p.procs {
		if _, err := f.Write(b); err != nil {
			_ = unix.Kill(pid, unix.SIGKILL)
			_ = unix.PtraceDetach(pid)
			return fmt.Errorf("move process %d into %s: %w", pid, f.Name(), err)
		}
	}
	if err := unix.PtraceDetach(pid); err != nil {
		_ = unix.Kill(pid, unix.SIGKILL)
		return fmt.Errorf("release process %d after joining cgroup %s: %w", pid, p.g.rel, err)
	}
	return nil
}

// procDir is the directory whose cgroup.procs lists every process of g.
func (g *Group) procDir() string { return g.Dirs()[0] }

// Procs lists the processes in g and its descendants.
func (g *Group) Procs() ([]int, error) {
	var pids []int
	err := filepath.WalkDir(g.procDir(), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENODEV) {
				return nil
			}
			return err
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids, err
}

// Kill sends SIGKILL to every process in g and its descendants until none is
// left (new forks are caught by the next round) or ctx ends.
func (g *Group) Kill(ctx context.Context) error {
	if g.v2 {
		// cgroup.kill (Linux 5.14) kills the whole subtree atomically.
		if err := os.WriteFile(filepath.Join(g.procDir(), "cgroup.kill"), []byte("1"), 0); err == nil {
			return g.waitEmpty(ctx)
		}
	}
	for {
		pids, err := g.Procs()
		if err != nil {
			return fmt.Errorf("list processes of cgroup %s: %w", g.rel, err)
		}
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kill processes of cgroup %s: %d left: %w", g.rel, len(pids), ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (g *Group) waitEmpty(ctx context.Context) error {
	for {
		pids, err := g.Procs()
		if err != nil || len(pids) == 0 {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cgroup %s: %d processes left: %w", g.rel, len(pids), ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Destroy kills every process in g and removes g and its descendants from
// every hierarchy. A group that is already gone is not an error. Without a
// deadline in ctx it gives up after 10 seconds.
func (g *Group) Destroy(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	if err := g.Kill(ctx); err != nil {
		return err
	}
	var errs []error
	for _, d := range g.Dirs() {
		if err := removeTree(ctx, d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeTree removes a cgroup directory and its children, deepest first.
// Only directories are removed (cgroupfs refuses anything else).
func removeTree(ctx context.Context, dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read cgroup %s: %w", dir, err)
	}
	for _, e := range ents {
		if e.IsDir() {
			if err := removeTree(ctx, filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	// A killed process leaves its cgroup a moment after it is reaped: retry EBUSY.
	for {
		err := unix.Rmdir(dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("remove cgroup %s: %w", dir, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("remove cgroup %s: still busy: %w", dir, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Children lists the names of the groups directly under rel (e.g. "commlab"),
// merged over every hierarchy commlab uses.
func Children(rel string) ([]string, error) {
	if rel != Root {
		if err := CheckPath(rel); err != nil {
			return nil, err
		}
	}
	g := &Group{rel: rel, v2: Unified()}
	seen := map[string]bool{}
	var out []string
	for _, d := range g.Dirs() {
		ents, err := os.ReadDir(d)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list cgroup %s: %w", d, err)
		}
		for _, e := range ents {
			if e.IsDir() && !seen[e.Name()] {
				seen[e.Name()] = true
				out = append(out, e.Name())
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// Read returns a control file of g in the hierarchy that holds it (v1) or the
// unified tree (v2), e.g. Read("pids.max").
func (g *Group) Read(file string) (string, error) {
	for _, d := range g.Dirs() {
		b, err := os.ReadFile(filepath.Join(d, file))
		if err == nil {
			return strings.TrimSpace(string(b)), nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("cgroup %s: no file %s: %w", g.rel, file, os.ErrNotExist)
}
