package course

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLibraryWatchReloads edits a chapter on disk and expects the served course to follow;
// a broken edit keeps the last good course.
func TestLibraryWatchReloads(t *testing.T) {
	dir := t.TempDir()
	for name, f := range goodFS() {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lib, err := NewLibrary(os.DirFS(dir), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := lib.Watch(ctx, dir, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	html := func() string { ch, _ := lib.Course().Chapter("ch02"); return string(ch.HTML) }
	waitFor := func(cond func() bool, what string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	ch02Path := filepath.Join(dir, "chapters", "ch02.md")
	if err := os.WriteFile(ch02Path, []byte(ch02+"\n新增的一段。\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(func() bool { return strings.Contains(html(), "新增的一段") }, "the edit to be served")

	before := lib.Course()
	if err := os.WriteFile(ch02Path, []byte("no front matter\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if lib.Course() != before {
		t.Error("a broken edit replaced the served course")
	}
}
