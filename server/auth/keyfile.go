package auth

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// KeyLen is the size of a secret key file.
const KeyLen = 32

// LoadOrCreateKey returns the 32-byte secret in the file at path, creating
// it (and its directory, 0700) with fresh random bytes and mode 0600 if it
// does not exist. Creation is atomic: the key is written to a temporary file
// and hard-linked into place, so a reader never sees a partial key and two
// processes starting at once end up with the same one. A key file that is
// the wrong size, or readable by group or others, is refused.
func LoadOrCreateKey(path string) ([]byte, error) {
	if key, err := readKey(path); !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create key %s: %w", path, err)
	}
	key := make([]byte, KeyLen)
	rand.Read(key)                           // never fails (crypto/rand, Go 1.24+)
	tmp, err := os.CreateTemp(dir, ".key-*") // mode 0600
	if err != nil {
		return nil, fmt.Errorf("create key %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(key)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("create key %s: %w", path, err)
	}
	// Link, unlike rename, fails if path appeared meanwhile: then the other
	// process's key wins and we read it.
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return readKey(path)
		}
		return nil, fmt.Errorf("create key %s: %w", path, err)
	}
	// Persist the directory entry too: a key lost in a crash would silently
	// invalidate everything signed with it.
	if err := syncDir(dir); err != nil {
		return nil, fmt.Errorf("create key %s: %w", path, err)
	}
	return key, nil
}

func readKey(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read key %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read key %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read key %s: not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("read key %s: mode %04o lets others read it; run chmod 600 %s", path, perm, path)
	}
	if fi.Size() != KeyLen {
		return nil, fmt.Errorf("read key %s: %d bytes, want %d (corrupt? remove it to make a new key, which invalidates what the old one signed)", path, fi.Size(), KeyLen)
	}
	key := make([]byte, KeyLen)
	if _, err := f.ReadAt(key, 0); err != nil {
		return nil, fmt.Errorf("read key %s: %w", path, err)
	}
	return key, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
