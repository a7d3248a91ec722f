// Package boundedread reads files that come from users (topologies, scenarios,
// course files) with a size bound, and refuses what is not a regular file,
// so that `lab up /dev/zero` or a 10 GB file fails at once with its name instead
// of filling memory.
package boundedread

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Bounds for the kinds of file commlab reads from users.
const (
	Config = 4 << 20 // a YAML topology, scenario, manifest or quiz
	Page   = 4 << 20 // a chapter's Markdown
)

// ErrTooLarge marks a file over its bound.
var ErrTooLarge = errors.New("file too large")

// File reads the regular file at path (symlinks followed), at most max bytes.
func File(path string, max int64) ([]byte, error) {
	// Non-blocking, so a FIFO fails at the regular-file check instead of hanging
	// in open; it changes nothing for a regular file.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return read(f, path, max)
}

// FS reads name from fsys, at most max bytes. A symlink is refused, where fsys can
// tell one (os.DirFS can): content must not pull in files from outside its tree.
func FS(fsys fs.FS, name string, max int64) ([]byte, error) {
	st, err := fs.Lstat(fsys, name) // Stat where fsys has no links
	if err != nil {
		return nil, err
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		return nil, &fs.PathError{Op: "read", Path: name, Err: errors.New("is a symbolic link; content files must be regular files inside the content directory")}
	}
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return read(f, name, max)
}

func read(f fs.File, name string, max int64) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("not a regular file (%s)", st.Mode().Type())}
	}
	if st.Size() > max {
		return nil, tooLarge(name, max)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max { // grew while read
		return nil, tooLarge(name, max)
	}
	return b, nil
}

func tooLarge(name string, max int64) error {
	return &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("%w: over %s", ErrTooLarge, human(max))}
}

func human(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
