//go:build unix

package boundedread

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
	"time"
)

func TestFile(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.yaml")
	big := filepath.Join(dir, "big.yaml")
	fifo := filepath.Join(dir, "fifo")
	os.WriteFile(small, []byte("name: x\n"), 0o644)
	os.WriteFile(big, make([]byte, 1025), 0o644)
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path, want string
	}{
		{small, ""},
		{big, "file too large: over 1 KiB"},
		{"/dev/zero", "not a regular file"}, // would grow without end
		{fifo, "not a regular file"},        // would block
		{dir, "not a regular file"},
		{filepath.Join(dir, "nope"), "no such file"},
	} {
		done := make(chan struct{})
		var b []byte
		var err error
		go func() { b, err = File(tt.path, 1024); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("File(%s) did not return", tt.path)
		}
		if tt.want == "" {
			if err != nil || string(b) != "name: x\n" {
				t.Errorf("File(%s) = %q, %v", tt.path, b, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.path) {
			t.Errorf("File(%s) error %v; want it to name the file and say %q", tt.path, err, tt.want)
		}
	}
}

func TestFSRefusesLinks(t *testing.T) {
	m := fstest.MapFS{
		"a.md":    {Data: []byte("ok")},
		"link.md": {Data: []byte("/etc/shadow"), Mode: os.ModeSymlink},
	}
	if b, err := FS(m, "a.md", 10); err != nil || string(b) != "ok" {
		t.Errorf("FS(a.md) = %q, %v", b, err)
	}
	if _, err := FS(m, "link.md", 10); err == nil || !strings.Contains(err.Error(), "link.md: is a symbolic link") {
		t.Errorf("FS(link.md) = %v, want a refusal naming the file", err)
	}
	// A link inside a real directory too (os.DirFS and os.Root report links).
	dir := t.TempDir()
	if err := os.Symlink("/etc/hostname", filepath.Join(dir, "ch.md")); err != nil {
		t.Fatal(err)
	}
	if _, err := FS(os.DirFS(dir), "ch.md", 1<<20); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("FS(DirFS, link) = %v", err)
	}
}
