package injector

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Entry is one journaled fault.
type Entry struct {
	ID     string            `json:"id"`
	Kind   string            `json:"kind"`
	Params map[string]string `json:"params"`
	// Fault is the kind's parameter struct as JSON, for rebuilding it.
	Fault    json.RawMessage `json:"fault"`
	Target   Target          `json:"target"`
	Created  time.Time       `json:"created"`
	Deadline time.Time       `json:"deadline"`
	BootID   string          `json:"boot_id"`
	// PID and PIDStart identify the process that applied the fault.
	PID      int    `json:"pid"`
	PIDStart uint64 `json:"pid_start"`
	// Command is the debrief's equivalent shell.
	Command []string `json:"command,omitempty"`
	// Undo is the latest undo recorded for the fault.
	Undo json.RawMessage `json:"undo,omitempty"`
	// Applied is set once Apply finished and read back; false means the process
	// stopped (or failed) in the middle, and only a revert is left to do.
	Applied bool `json:"applied"`
}

// Expired reports whether the deadline has passed at now.
func (e Entry) Expired(now time.Time) bool { return !now.Before(e.Deadline) }

// Record kinds in the journal file.
const (
	recApply    = "apply"    // entry + first undo, written before the host is touched
	recUndo     = "undo"     // a newer undo (more objects created)
	recApplied  = "applied"  // apply finished and read back
	recReverted = "reverted" // revert succeeded; the entry is dead
)

type record struct {
	Op    string          `json:"op"`
	ID    string          `json:"id"`
	At    time.Time       `json:"at"`
	Entry *Entry          `json:"entry,omitempty"`
	Undo  json.RawMessage `json:"undo,omitempty"`
}

// journal is an append-only file of JSON lines under <data>/injector/journal,
// guarded by flock on journal.lock so the CLI and the server can share it.
type journal struct {
	dir string
	mu  sync.Mutex
	log *slog.Logger
}

// compactAfter is how many dead records trigger a rewrite of the journal.
const compactAfter = 256

func openJournal(dir string, log *slog.Logger) (*journal, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create journal dir %s: %w", dir, err)
	}
	j := &journal{dir: dir, log: log}
	// A compaction killed halfway leaves its temporary file; the journal itself is intact.
	_ = os.Remove(filepath.Join(dir, "journal.tmp"))
	return j, nil
}

func (j *journal) path() string { return filepath.Join(j.dir, "journal") }

// locked runs fn holding the journal lock (exclusive, across processes).
func (j *journal) locked(fn func() error) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	f, err := os.OpenFile(filepath.Join(j.dir, "journal.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("open journal lock: %w", err)
	}
	defer f.Close()
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("lock journal: %w", err)
	}
	defer unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return fn()
}

// load reads the live entries (caller holds the lock) and counts dead records.
func (j *journal) load() (live map[string]*Entry, order []string, dead int, err error) {
	live = map[string]*Entry{}
	f, err := os.Open(j.path())
	if errors.Is(err, os.ErrNotExist) {
		return live, nil, 0, nil
	}
	if err != nil {
		return nil, nil, 0, fmt.Errorf("open journal: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var r record
		if err := json.Unmarshal(b, &r); err != nil {
			// A record torn by a kill mid-write: the host was not touched after it
			// (Record returns only after fsync), so skipping it is safe.
			j.log.Warn("journal: skipping unreadable record", "file", j.path(), "line", line, "err", err)
			dead++
			continue
		}
		switch r.Op {
		case recApply:
			if r.Entry == nil {
				dead++
				continue
			}
			e := *r.Entry
			if _, ok := live[e.ID]; !ok {
				order = append(order, e.ID)
			}
			live[e.ID] = &e
		case recUndo:
			if e, ok := live[r.ID]; ok {
				e.Undo = r.Undo
			}
			dead++
		case recApplied:
			if e, ok := live[r.ID]; ok {
				e.Applied = true
			}
			dead++
		case recReverted:
			if _, ok := live[r.ID]; ok {
				delete(live, r.ID)
				dead++ // the apply record is dead now too
			}
			dead++
		default:
			dead++
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, 0, fmt.Errorf("read journal: %w", err)
	}
	return live, order, dead, nil
}

// append writes r and fsyncs it (caller holds the lock).
func (j *journal) append(r record) error {
	r.At = time.Now().UTC()
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode journal record: %w", err)
	}
	_, statErr := os.Stat(j.path())
	created := errors.Is(statErr, os.ErrNotExist)
	f, err := os.OpenFile(j.path(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open journal: %w", err)
	}
	defer f.Close()
	if torn, err := endsTorn(j.path()); err == nil && torn {
		b = append([]byte("\n"), b...) // never glue a record to a torn one
	}
	b = append(b, '\n')
	if _, err := f.Write(b); err != nil {
		return fmt.Errorf("write journal: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync journal: %w", err)
	}
	if created {
		return syncDir(j.dir)
	}
	return nil
}

// endsTorn reports whether the file's last byte is not a newline.
func endsTorn(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return false, err
	}
	var last [1]byte
	if _, err := f.ReadAt(last[:], st.Size()-1); err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	return last[0] != '\n', nil
}

// compact rewrites the journal with only the live entries (caller holds the lock).
func (j *journal) compact(live map[string]*Entry, order []string) error {
	tmp := filepath.Join(j.dir, "journal.tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("compact journal: %w", err)
	}
	w := bufio.NewWriter(f)
	for _, id := range order {
		e, ok := live[id]
		if !ok {
			continue
		}
		recs := []record{{Op: recApply, ID: id, Entry: e, At: e.Created}}
		if e.Applied {
			recs = append(recs, record{Op: recApplied, ID: id, At: e.Created})
		}
		for _, r := range recs {
			b, err := json.Marshal(r)
			if err != nil {
				f.Close()
				return fmt.Errorf("compact journal: %w", err)
			}
			w.Write(append(b, '\n'))
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("compact journal: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("compact journal: fsync: %w", err)
	}
	f.Close()
	if err := os.Rename(tmp, j.path()); err != nil {
		return fmt.Errorf("compact journal: %w", err)
	}
	return syncDir(j.dir)
}

// entries returns the live entries, oldest first.
func (j *journal) entries() ([]Entry, error) {
	var out []Entry
	err := j.locked(func() error {
		live, order, _, err := j.load()
		if err != nil {
			return err
		}
		for _, id := range order {
			if e, ok := live[id]; ok {
				out = append(out, *e)
			}
		}
		return nil
	})
	sort.SliceStable(out, func(a, b int) bool { return out[a].Created.Before(out[b].Created) })
	return out, err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}
