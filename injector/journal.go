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
	"slices"
	"sort"
	"sync"
	"time"
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
	recRenewed  = "renewed"  // a new deadline replaces the entry's
)

type record struct {
	Op    string          `json:"op"`
	ID    string          `json:"id"`
	At    time.Time       `json:"at"`
	Entry *Entry          `json:"entry,omitempty"`
	Undo  json.RawMessage `json:"undo,omitempty"`
	// Deadline is a renewed record's new deadline.
	Deadline time.Time `json:"deadline,omitzero"`
}

// journal is an append-only file of JSON lines under <data>/injector/journal,
// guarded by flock on journal.lock so the CLI and the server can share it. The
// parsed state is cached and only the records appended since are read again,
// as long as the file keeps its inode (a compaction replaces it).
type journal struct {
	dir string
	mu  sync.Mutex
	log *slog.Logger

	cIno   uint64
	cOff   int64
	cLive  map[string]*Entry
	cOrder []string
	cDead  int
}

// compactAfter is how many dead records trigger a rewrite of the journal.
const compactAfter = 64

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
	if err := lockFile(f); err != nil {
		return fmt.Errorf("lock journal: %w", err)
	}
	defer unlockFile(f)
	return fn()
}

// load returns the live entries (caller holds the lock; the maps are shared
// with the cache and must not be changed) and counts the dead records.
func (j *journal) load() (live map[string]*Entry, order []string, dead int, err error) {
	f, err := os.Open(j.path())
	if errors.Is(err, os.ErrNotExist) {
		j.cIno, j.cOff, j.cLive, j.cOrder, j.cDead = 0, 0, map[string]*Entry{}, nil, 0
		return j.cLive, nil, 0, nil
	}
	if err != nil {
		return nil, nil, 0, fmt.Errorf("open journal: %w", err)
	}
	defer f.Close()
	ino, size, err := fstat(int(f.Fd()))
	if err != nil {
		return nil, nil, 0, fmt.Errorf("stat journal: %w", err)
	}
	if j.cLive == nil || ino != j.cIno || size < j.cOff {
		j.cIno, j.cOff, j.cLive, j.cOrder, j.cDead = ino, 0, map[string]*Entry{}, nil, 0
	}
	if size > j.cOff {
		b := make([]byte, size-j.cOff)
		if _, err := f.ReadAt(b, j.cOff); err != nil && !errors.Is(err, io.EOF) {
			return nil, nil, 0, fmt.Errorf("read journal: %w", err)
		}
		// Only whole lines: a trailing fragment is a record being torn by a
		// kill; the next append starts a new line after it.
		end := bytes.LastIndexByte(b, '\n') + 1
		for _, line := range bytes.Split(b[:end], []byte("\n")) {
			j.replay(bytes.TrimSpace(line))
		}
		j.cOff += int64(end)
	}
	return j.cLive, j.cOrder, j.cDead, nil
}

// replay applies one record to the cached state.
func (j *journal) replay(b []byte) {
	if len(b) == 0 {
		return
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		// A record torn by a kill mid-write: the host was not touched after it
		// (Record returns only after fsync), so skipping it is safe.
		j.log.Warn("journal: skipping unreadable record", "file", j.path(), "err", err)
		j.cDead++
		return
	}
	switch r.Op {
	case recApply:
		if r.Entry == nil {
			j.cDead++
			return
		}
		e := *r.Entry
		if _, ok := j.cLive[e.ID]; !ok {
			j.cOrder = append(j.cOrder, e.ID)
		}
		j.cLive[e.ID] = &e
	case recUndo:
		if e, ok := j.cLive[r.ID]; ok {
			e.Undo = r.Undo
		}
		j.cDead++
	case recApplied:
		if e, ok := j.cLive[r.ID]; ok {
			e.Applied = true
		}
		j.cDead++
	case recRenewed:
		if e, ok := j.cLive[r.ID]; ok && !r.Deadline.IsZero() {
			e.Deadline = r.Deadline
		}
		j.cDead++
	case recReverted:
		if _, ok := j.cLive[r.ID]; ok {
			delete(j.cLive, r.ID)
			j.cOrder = slices.DeleteFunc(j.cOrder, func(id string) bool { return id == r.ID })
			j.cDead++ // the apply record is dead now too
		}
		j.cDead++
	default:
		j.cDead++
	}
}

// append writes r and fsyncs it (caller holds the lock).
func (j *journal) append(r record) error { return j.write(r, true) }

// appendNoSync writes r without waiting for the disk: for records whose loss in
// a power cut costs nothing (the entry then looks unapplied or unreverted, and
// the next sweep reverts it again, which is idempotent).
func (j *journal) appendNoSync(r record) error { return j.write(r, false) }

func (j *journal) write(r record, sync bool) error {
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
	if !sync {
		return nil
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
