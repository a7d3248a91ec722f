package auth

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestLoadOrCreateKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data", "keys")
	path := filepath.Join(dir, "secret.key")
	key, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if len(key) != KeyLen || bytes.Equal(key, make([]byte, KeyLen)) {
		t.Errorf("key = %x, want %d random bytes", key, KeyLen)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, dir: os.ModeDir | 0o700} {
		if fi, err := os.Stat(p); err != nil || fi.Mode() != want {
			t.Errorf("mode of %s = %v (%v), want %v", p, fi.Mode(), err, want)
		}
	}
	again, err := LoadOrCreateKey(path)
	if err != nil || !bytes.Equal(again, key) {
		t.Errorf("second call = %x, %v; want the same key", again, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the key (temporary file left behind?)", len(entries))
	}
	other, err := LoadOrCreateKey(filepath.Join(dir, "other.key"))
	if err != nil || bytes.Equal(other, key) {
		t.Errorf("a second key file = %x, %v; want a different key", other, err)
	}
}

func TestLoadOrCreateKeyRefusesBadFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, path, want string
	}{
		{"short", write("short.key", make([]byte, 16), 0o600), "16 bytes, want 32"},
		{"empty", write("empty.key", nil, 0o600), "0 bytes, want 32"},
		{"world-readable", write("open.key", make([]byte, 32), 0o644), "chmod 600"},
		{"group-readable", write("group.key", make([]byte, 32), 0o640), "chmod 600"},
		{"directory", dir, "not a regular file"},
	}
	for _, tc := range tests {
		_, err := LoadOrCreateKey(tc.path)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("%s: error = %v, want one naming %s and containing %q", tc.name, err, tc.path, tc.want)
		}
	}
	// A refused file is left as it was, never replaced.
	if b, _ := os.ReadFile(filepath.Join(dir, "short.key")); len(b) != 16 {
		t.Errorf("short.key now holds %d bytes, want it untouched", len(b))
	}
}

func TestLoadOrCreateKeyConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "race.key")
	const n = 16
	keys := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { keys[i], errs[i] = LoadOrCreateKey(path) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || !bytes.Equal(keys[i], keys[0]) {
			t.Errorf("caller %d got %x, %v; want the one key %x", i, keys[i], errs[i], keys[0])
		}
	}
	onDisk, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(onDisk, keys[0]) {
		t.Errorf("file holds %x, callers got %x", onDisk, keys[0])
	}
}
