package course

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Library holds the course being served and, for authors, swaps in a new one when the
// content directory changes. A reload with problems keeps the old course and logs them.
type Library struct {
	fsys fs.FS
	opts Options
	cur  atomic.Pointer[Course]
}

// NewLibrary loads the course from fsys; any problem is an error listing all of them.
func NewLibrary(fsys fs.FS, opts Options) (*Library, error) {
	l := &Library{fsys: fsys, opts: opts}
	c, probs := Load(fsys, opts)
	if len(probs) > 0 {
		return nil, probs
	}
	l.cur.Store(c)
	return l, nil
}

// Course returns the course being served.
func (l *Library) Course() *Course { return l.cur.Load() }

// Watch reloads the course whenever a file under dir changes, until ctx is done.
// dir must be the directory the library was loaded from.
func (l *Library) Watch(ctx context.Context, dir string, log *slog.Logger) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", dir, err)
	}
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			err = w.Add(p)
		}
		return err
	})
	if err != nil {
		w.Close()
		return fmt.Errorf("watch %s: %w", dir, err)
	}
	go func() {
		defer w.Close()
		// Editors write several events per save; reload once things settle.
		var debounce <-chan time.Time
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if ev.Has(fsnotify.Create) {
					if fi, err := os.Stat(ev.Name); err == nil && fi.IsDir() {
						_ = w.Add(ev.Name)
					}
				}
				debounce = time.After(150 * time.Millisecond)
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				log.Warn("content watch", "err", err)
			case <-debounce:
				debounce = nil
				l.reload(log)
			}
		}
	}()
	return nil
}

func (l *Library) reload(log *slog.Logger) {
	c, probs := Load(l.fsys, l.opts)
	if len(probs) > 0 {
		for _, p := range probs {
			log.Warn("content reload kept the previous course", "problem", p.String())
		}
		return
	}
	l.cur.Store(c)
	log.Info("content reloaded", "chapters", len(c.Chapters()))
}
