package injector

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"
)

func testJournal(t *testing.T) *journal {
	j, err := openJournal(t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func applyRec(id string) record {
	return record{Op: recApply, ID: id, Entry: &Entry{ID: id, Kind: "nic-down", Created: time.Now(), Undo: json.RawMessage(`{"nic":"rdma0"}`)}}
}

func TestJournalReplay(t *testing.T) {
	j := testJournal(t)
	for _, r := range []record{
		applyRec("f00000001"), applyRec("f00000002"),
		{Op: recUndo, ID: "f00000001", Undo: json.RawMessage(`{"nic":"rdma1"}`)},
		{Op: recApplied, ID: "f00000001"},
		{Op: recReverted, ID: "f00000002"},
		applyRec("f00000003"),
	} {
		if err := j.append(r); err != nil {
			t.Fatal(err)
		}
	}
	live, order, dead, err := j.load()
	if err != nil {
		t.Fatal(err)
	}
	if len(live) != 2 || live["f00000001"] == nil || live["f00000003"] == nil {
		t.Fatalf("live = %v", live)
	}
	if e := live["f00000001"]; !e.Applied || string(e.Undo) != `{"nic":"rdma1"}` {
		t.Errorf("f00000001 = %+v: want applied with the newer undo", e)
	}
	if live["f00000003"].Applied {
		t.Error("f00000003 was never marked applied")
	}
	if len(order) != 2 || dead != 4 {
		t.Errorf("order %v dead %d, want 2 ids and 4 dead records", order, dead)
	}
}

// TestJournalTornRecord: a record cut short by a kill is skipped, and the next
// record starts on a line of its own.
func TestJournalTornRecord(t *testing.T) {
	j := testJournal(t)
	if err := j.append(applyRec("f00000001")); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(applyRec("f00000002"))
	f, _ := os.OpenFile(j.path(), os.O_APPEND|os.O_WRONLY, 0)
	f.Write(b[:len(b)/2])
	f.Close()
	if err := j.append(record{Op: recApplied, ID: "f00000001"}); err != nil {
		t.Fatal(err)
	}
	live, _, _, err := j.load()
	if err != nil {
		t.Fatal(err)
	}
	if len(live) != 1 || !live["f00000001"].Applied {
		t.Fatalf("live = %v", live)
	}
	raw, _ := os.ReadFile(j.path())
	if lines := strings.Split(strings.TrimSpace(string(raw)), "\n"); len(lines) != 3 {
		t.Errorf("journal has %d lines, want 3 (apply, torn, applied):\n%s", len(lines), raw)
	}
}

func TestJournalCompact(t *testing.T) {
	j := testJournal(t)
	for i := range 300 {
		id := fmt.Sprintf("f%08x", i)
		j.append(applyRec(id))
		if i != 7 {
			j.append(record{Op: recReverted, ID: id})
		}
	}
	live, order, dead, _ := j.load()
	if dead < compactAfter {
		t.Fatalf("dead = %d", dead)
	}
	if err := j.compact(live, order); err != nil {
		t.Fatal(err)
	}
	live2, _, dead2, _ := j.load()
	if len(live2) != 1 || live2["f00000007"] == nil || dead2 != 0 {
		t.Fatalf("after compaction: live %v dead %d", live2, dead2)
	}
	if _, err := os.Stat(j.path() + ".tmp"); err == nil {
		t.Error("temporary file left")
	}
}

// TestJournalLocked: concurrent appends from several goroutines (each with its
// own flock) never interleave.
func TestJournalLocked(t *testing.T) {
	j := testJournal(t)
	j2 := &journal{dir: j.dir, log: j.log}
	done := make(chan struct{})
	for _, jj := range []*journal{j, j2} {
		go func() {
			for i := range 100 {
				jj.locked(func() error { return jj.append(applyRec(fmt.Sprintf("f%08x", i))) })
			}
			done <- struct{}{}
		}()
	}
	<-done
	<-done
	raw, _ := os.ReadFile(j.path())
	for i, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var r record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %d torn: %v", i+1, err)
		}
	}
}
