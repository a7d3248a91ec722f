package netns

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/commlab/commlab/labs/cgroup"
	"github.com/commlab/commlab/labs/topology"
)

// State is what a sandbox records about itself before it creates anything, so
// that any commlab process can find, use or remove it later: the state file
// <data>/sandboxes/<id>.json and a copy of the essentials in the slot lease
// /run/commlab/labs/slots/<index>.
type State struct {
	ID       string             `json:"id"`
	Index    int                `json:"index"`
	Topology *topology.Topology `json:"topology"`
	Created  time.Time          `json:"created"`
	Expires  time.Time          `json:"expires"`
	// Owner is the process whose death orphans the sandbox; PID 0 means
	// detached: only Down, TTL expiry or a sweep of expired ones remove it.
	Owner      Owner         `json:"owner"`
	Limits     cgroup.Limits `json:"limits"`
	LearnerUID uint32        `json:"learner_uid"`
	HomeSize   int64         `json:"home_size"`
	// DataDir is the absolute data directory (hidden from learner shells).
	DataDir string `json:"data_dir"`
}

// Owner identifies a process across pid reuse and reboots.
type Owner struct {
	PID    int    `json:"pid"`
	Start  uint64 `json:"start"` // start time in clock ticks after boot (/proc/<pid>/stat field 22)
	BootID string `json:"boot_id"`
}

// lease is the slot file: it reserves the index (and with it the address slice
// and learner uid) host-wide, and names the owner for sweeps that run with
// another data directory.
type lease struct {
	ID      string    `json:"id"`
	Owner   Owner     `json:"owner"`
	Expires time.Time `json:"expires"`
	State   string    `json:"state"` // path of the state file
}

// self describes the calling process as an owner.
func self() (Owner, error) {
	pid := os.Getpid()
	st, err := procStart(pid)
	if err != nil {
		return Owner{}, err
	}
	return Owner{PID: pid, Start: st, BootID: bootID()}, nil
}

// Alive reports whether the owner process still runs (same boot, same pid,
// same start time). A detached owner (PID 0) counts as alive.
func (o Owner) Alive() bool {
	if o.PID == 0 {
		return true
	}
	if o.BootID != bootID() {
		return false
	}
	st, err := procStart(o.PID)
	return err == nil && st == o.Start
}

// live reports whether a sandbox recorded with owner o and expiry exp must be kept.
func live(o Owner, exp time.Time, now time.Time) bool {
	return o.Alive() && (exp.IsZero() || now.Before(exp))
}

func procStart(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces and parentheses: split after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, fmt.Errorf("parse /proc/%d/stat: %d fields", pid, len(f))
	}
	if f[0] == "Z" || f[0] == "X" {
		// Exited, not yet reaped (e.g. a killed `lab up` whose parent has not
		// waited): it will never tear its sandbox down.
		return 0, fmt.Errorf("process %d has exited (state %s)", pid, f[0])
	}
	return strconv.ParseUint(f[19], 10, 64) // field 22 overall
}

func bootID() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
}

// writeFileSync writes data to path through a temporary file, fsyncs it,
// renames it into place and fsyncs the directory, so that a crash leaves
// either the old file or the new one.
func writeFileSync(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// writeState records st under its data directory.
func writeState(st *State) error {
	dir := filepath.Join(st.DataDir, stateSubdir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create state directory: %w", err)
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileSync(statePath(st.DataDir, st.ID), b, 0o600); err != nil {
		return fmt.Errorf("write sandbox state: %w", err)
	}
	return nil
}

// ReadState loads the state file of sandbox id under dataDir.
func ReadState(dataDir, id string) (*State, error) {
	if err := ValidID(id); err != nil {
		return nil, err
	}
	return readStateFile(statePath(dataDir, id))
}

func readStateFile(path string) (*State, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("sandbox state %s: %w", path, ErrNoSandbox)
		}
		return nil, fmt.Errorf("read sandbox state: %w", err)
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("parse sandbox state %s: %w", path, err)
	}
	if err := ValidID(st.ID); err != nil {
		return nil, fmt.Errorf("sandbox state %s: %w", path, err)
	}
	return &st, nil
}

// ListStates returns every sandbox recorded under dataDir (unreadable files
// are skipped: a sweep deals with them).
func ListStates(dataDir string) ([]*State, error) {
	ents, err := os.ReadDir(filepath.Join(dataDir, stateSubdir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	var out []*State
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || ValidID(id) != nil {
			continue
		}
		if st, err := ReadState(dataDir, id); err == nil {
			out = append(out, st)
		}
	}
	return out, nil
}

func slotPath(index int) string { return filepath.Join(slotDir, fmt.Sprintf("%03d", index)) }

// takeSlot reserves the lowest free sandbox index host-wide by creating its
// lease file exclusively.
func takeSlot(l lease) (int, error) {
	if err := os.MkdirAll(slotDir, 0o700); err != nil {
		return 0, fmt.Errorf("create %s: %w", slotDir, err)
	}
	b, err := json.Marshal(l)
	if err != nil {
		return 0, err
	}
	for i := 0; i < topology.MaxSandboxes; i++ {
		f, err := os.OpenFile(slotPath(i), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("take sandbox slot %d: %w", i, err)
		}
		_, werr := f.Write(b)
		serr := f.Sync()
		cerr := f.Close()
		if err := errors.Join(werr, serr, cerr); err != nil {
			os.Remove(slotPath(i))
			return 0, fmt.Errorf("write sandbox slot %d: %w", i, err)
		}
		if err := syncDir(slotDir); err != nil {
			return 0, err
		}
		return i, nil
	}
	// No operator advice here: a learner's lab page may show this error.
	return 0, fmt.Errorf("%w: all %d sandbox slots are taken", ErrBusy, topology.MaxSandboxes)
}

// rewriteSlot replaces the lease of a slot the caller holds (a renewed expiry),
// atomically: a reader sees the old lease or the new one.
func rewriteSlot(index int, l lease) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	return writeFileSync(slotPath(index), b, 0o600)
}

// FreeSlots is how many more sandboxes this host can take now.
func FreeSlots() int { return topology.MaxSandboxes - len(readSlots()) }

// readSlots returns every lease, keyed by index.
func readSlots() map[int]lease {
	out := map[int]lease{}
	ents, err := os.ReadDir(slotDir)
	if err != nil {
		return out
	}
	for _, e := range ents {
		i, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(slotDir, e.Name()))
		if err != nil {
			continue
		}
		var l lease
		if json.Unmarshal(b, &l) != nil {
			// A lease torn by a crash: keep the index with no id so a sweep frees it.
			l = lease{}
		}
		out[i] = l
	}
	return out
}
