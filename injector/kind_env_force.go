package injector

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// EnvForce forces environment variables on the node's workloads (NCCL_P2P_DISABLE=1,
// NCCL_SOCKET_IFNAME=<wrong NIC>, NCCL_ALGO, ...) by writing them where a real
// cluster would hide them: a profile.d script, the job's environment file, or
// the container's env file, all inside the node's /etc (Target.EtcDir). The
// workload launcher reads them through EnvFor.
type EnvForce struct {
	Vars  EnvVars `json:"vars" param:"vars,required" doc:"KEY=VALUE pairs separated by spaces, e.g. NCCL_P2P_DISABLE=1 NCCL_ALGO=Ring"`
	Where string  `json:"where" param:"where" doc:"profile.d, job-env or container-env"`
	File  string  `json:"file" param:"file" doc:"file name in profile.d"`
}

var _ Fault = (*EnvForce)(nil)

// EnvForceKind registers env-force.
func EnvForceKind() Kind {
	return Kind{Name: "env-force", Summary: "force environment variables on the node's workloads (profile.d, job env, container env)",
		Login: true,
		New:   func() Fault { return &EnvForce{Where: "profile.d", File: "nccl.sh"} }, NewUndo: func() Undo { return &fileUndo{} }}
}

// Kind implements Fault.
func (f *EnvForce) Kind() string { return "env-force" }

// Validate implements Fault.
func (f *EnvForce) Validate() error {
	if len(f.Vars) == 0 {
		return invalid("vars: give at least one KEY=VALUE")
	}
	switch f.Where {
	case "profile.d", "job-env", "container-env":
	default:
		return invalid("where %q: want profile.d, job-env or container-env", f.Where)
	}
	return validFile("file", f.File)
}

func (f *EnvForce) claims() []string { return []string{"file:" + f.rel()} }

// rel is the file's path relative to the node's /etc.
func (f *EnvForce) rel() string {
	switch f.Where {
	case "job-env":
		return "commlab/job.env"
	case "container-env":
		return "commlab/container.env"
	}
	return filepath.Join("profile.d", f.File)
}

func (f *EnvForce) content() []byte {
	var b strings.Builder
	if f.Where == "profile.d" {
		b.WriteString("# site NCCL settings\n")
		for _, kv := range f.Vars {
			fmt.Fprintf(&b, "export %s\n", kv)
		}
	} else {
		for _, kv := range f.Vars {
			fmt.Fprintf(&b, "%s\n", kv)
		}
	}
	return []byte(b.String())
}

// Command implements Fault.
func (f *EnvForce) Command(t Target) []string {
	return []string{fmt.Sprintf("printf %q > %s", string(f.content()), filepath.Join("/etc", f.rel()))}
}

// Apply implements Fault.
func (f *EnvForce) Apply(ctx context.Context, t Target, op *Op) (Undo, error) {
	etc := t.etcDir()
	path := filepath.Join(etc, f.rel())
	if _, err := os.Lstat(path); err == nil {
		return nil, fmt.Errorf("%w: %s exists already and commlab did not write it", ErrConflict, path)
	}
	// Directories commlab creates are removed again when empty.
	var created []string
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		created = append([]string{d}, created...)
		if d == "/" || d == "." {
			break
		}
	}
	u := &fileUndo{Path: path, Dirs: created, BootID: bootID()}
	if err := op.Record(u); err != nil {
		return nil, err
	}
	for _, d := range created {
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return u, fmt.Errorf("create %s: %w", d, err)
		}
	}
	if err := writeFileSync(path, f.content(), 0o644); err != nil {
		return u, err
	}
	got, err := EnvFor(t)
	if err != nil {
		return u, err
	}
	for _, kv := range f.Vars {
		found := false
		for _, g := range got {
			found = found || g == kv
		}
		if !found {
			return u, fmt.Errorf("read back %s: %s missing from the node's environment", path, kv)
		}
	}
	return u, ctx.Err()
}

// writeFileSync writes a file atomically (temp file, fsync, rename).
func writeFileSync(path string, b []byte, mode os.FileMode) error {
	tmp := path + ".tmp-commlab"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, werr := f.Write(b)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// fileUndo removes a file commlab wrote (it did not exist before) and the
// directories it created for it, when empty.
type fileUndo struct {
	Path   string   `json:"path"`
	Dirs   []string `json:"dirs,omitempty"`
	BootID string   `json:"boot_id"`
}

// Revert implements Undo.
func (u *fileUndo) Revert(ctx context.Context) error {
	if !filepath.IsAbs(u.Path) || filepath.Clean(u.Path) != u.Path || strings.HasPrefix(u.Path, "/etc/") && !strings.HasPrefix(u.Path, "/etc/netns/") {
		return fmt.Errorf("refusing to remove %q: not a node file", u.Path)
	}
	for _, p := range []string{u.Path + ".tmp-commlab", u.Path} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", p, err)
		}
	}
	for i := len(u.Dirs) - 1; i >= 0; i-- {
		_ = os.Remove(u.Dirs[i]) // fails when not empty, which is fine
	}
	return ctx.Err()
}

// EnvFor returns the variables that env-force faults impose on the node t, as
// KEY=VALUE, sorted by key. The workload launcher adds them to each rank's
// environment. Precedence follows a real cluster: the container's env file, then
// profile.d scripts (in name order), then the job's env file.
func EnvFor(t Target) ([]string, error) {
	etc := t.etcDir()
	vars := map[string]string{}
	read := func(path string, export bool) error {
		f, err := os.Open(path)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if export {
				var ok bool
				if line, ok = strings.CutPrefix(line, "export "); !ok {
					continue
				}
			}
			k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
			if ok && reEnvKey.MatchString(k) && !strings.HasPrefix(line, "#") {
				vars[k] = strings.Trim(v, `"'`)
			}
		}
		return sc.Err()
	}
	if err := read(filepath.Join(etc, "commlab/container.env"), false); err != nil {
		return nil, err
	}
	scripts, _ := filepath.Glob(filepath.Join(etc, "profile.d", "*.sh"))
	sort.Strings(scripts)
	for _, s := range scripts {
		if err := read(s, true); err != nil {
			return nil, err
		}
	}
	if err := read(filepath.Join(etc, "commlab/job.env"), false); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(vars))
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out, nil
}
