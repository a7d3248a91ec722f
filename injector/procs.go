package injector

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// tagEnv marks every process a fault starts; a sweep finds them by it even when
// the process that started them died before journaling their pids.
const tagEnv = "COMMLAB_FAULT"

// Proc identifies a process across pid reuse.
type Proc struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"` // clock ticks after boot, /proc/<pid>/stat field 22
}

// procStart returns the start time of pid, or 0 when it does not exist.
func procStart(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name may hold spaces and parentheses: fields start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0
	}
	if f[0] == "Z" || f[0] == "X" {
		return 0 // exited, waiting to be reaped
	}
	v, _ := strconv.ParseUint(f[19], 10, 64)
	return v
}

// alive reports whether p still runs (same pid, same start time).
func (p Proc) alive() bool { return p.PID > 0 && p.Start != 0 && procStart(p.PID) == p.Start }

// lookTool finds an executable by name in PATH or the sbin directories.
func lookTool(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"} {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: %s is not installed", ErrUnsupported, name)
}

// spawn starts argv detached (own session, stdio on /dev/null), tagged with the
// fault id, behind the helper's gate: the process waits until release is called,
// which the caller does once the pid is journaled. If this process dies first,
// the gate reads end-of-file and exits without running argv, so no process can
// escape both the journal and a sweep's scan for the tag (a process between
// fork and exec does not carry the tag yet). The child is reaped in the
// background while this process lives. release(false) closes the gate without
// running argv (what this process dying amounts to).
func spawn(helper []string, id string, argv []string) (p Proc, release func(run bool) error, err error) {
	if len(helper) == 0 {
		return Proc{}, nil, fmt.Errorf("start %s: no helper process configured", filepath.Base(argv[0]))
	}
	r, w, err := os.Pipe()
	if err != nil {
		return Proc{}, nil, fmt.Errorf("start %s: %w", filepath.Base(argv[0]), err)
	}
	defer r.Close()
	full := append(append(append([]string(nil), helper...), "gate", "--"), argv...)
	cmd := exec.Command(full[0], full[1:]...)
	cmd.Env = append(os.Environ(), tagEnv+"="+id, helperEnv+"=1")
	cmd.ExtraFiles = []*os.File{r} // fd 3 in the child
	cmd.SysProcAttr = newSession()
	if err := cmd.Start(); err != nil {
		w.Close()
		return Proc{}, nil, fmt.Errorf("start %s: %w", filepath.Base(argv[0]), err)
	}
	p = Proc{PID: cmd.Process.Pid, Start: procStart(cmd.Process.Pid)}
	go cmd.Wait()
	return p, func(run bool) error {
		defer w.Close()
		if !run {
			return nil
		}
		if _, err := w.Write([]byte{gateGo}); err != nil {
			return fmt.Errorf("release %s: %w", filepath.Base(argv[0]), err)
		}
		return nil
	}, nil
}

// gateGo is the byte that lets a gated process run.
const gateGo = 'g'

// runGate waits for the go byte on fd 3, then execs argv (same pid, same tag).
func runGate(argv []string) error {
	gate := os.NewFile(3, "gate")
	var b [1]byte
	if n, _ := gate.Read(b[:]); n != 1 || b[0] != gateGo {
		return errors.New("gate: the process that started this one is gone; not running")
	}
	gate.Close()
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return err
	}
	env := os.Environ()
	if len(argv) < 2 || argv[1] != helperArg {
		// Not a helper: the marker must not make a commlab it starts a helper.
		env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, helperEnv+"=") })
	}
	return syscall.Exec(path, argv, env)
}

// tagged lists the processes carrying the tag of fault id.
func tagged(id string) []Proc {
	want := []byte(tagEnv + "=" + id + "\x00")
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []Proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.Contains(append(env, 0), want) {
			continue
		}
		if st := procStart(pid); st != 0 {
			out = append(out, Proc{PID: pid, Start: st})
		}
	}
	return out
}

// stopProcs ends the fault's processes: the recorded ones (if still the same
// process) and any found by tag. It sends sig, waits up to grace, then SIGKILL.
// Processes of another boot are long gone.
func stopProcs(ctx context.Context, id, boot string, recorded []Proc, sig syscall.Signal, grace time.Duration) error {
	var procs []Proc
	if sameBoot(boot) {
		for _, p := range recorded {
			if p.alive() {
				procs = append(procs, p)
			}
		}
	}
	for _, p := range tagged(id) {
		dup := false
		for _, q := range procs {
			dup = dup || q.PID == p.PID
		}
		if !dup {
			procs = append(procs, p)
		}
	}
	if len(procs) == 0 {
		return nil
	}
	signal := func(s syscall.Signal) {
		for _, p := range procs {
			if p.alive() {
				if err := kill(p.PID, s); err != nil && !errors.Is(err, syscall.ESRCH) {
					continue
				}
			}
		}
	}
	waitGone := func(d time.Duration) bool {
		deadline := time.Now().Add(d)
		for {
			left := false
			for _, p := range procs {
				left = left || p.alive()
			}
			if !left {
				return true
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return false
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	signal(sig)
	if waitGone(grace) {
		return nil
	}
	signal(syscall.SIGKILL)
	if waitGone(3 * time.Second) {
		return nil
	}
	return fmt.Errorf("processes of fault %s still running after SIGKILL", id)
}
