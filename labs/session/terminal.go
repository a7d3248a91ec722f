package session

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/commlab/commlab/labs/record"
)

// scrollbackMax is how much output a terminal keeps for a reconnecting browser.
const scrollbackMax = 256 << 10

// Terminal is a learner's shell in one node: recorded (asciicast v2, on the server),
// with scrollback for reconnects and any number of attached viewers.
type Terminal struct {
	Node string
	pty  PTY
	rec  *record.Writer
	path string
	log  *slog.Logger

	mu        sync.Mutex
	scroll    []byte
	subs      map[chan []byte]struct{}
	lastInput time.Time
	closed    bool
	done      chan struct{}
}

func openTerminal(ctx context.Context, env Env, node, recPath string, log *slog.Logger) (*Terminal, error) {
	if err := os.MkdirAll(filepath.Dir(recPath), 0o700); err != nil {
		return nil, err
	}
	rec, err := record.Create(recPath, record.Header{Width: 120, Height: 32, Title: node})
	if err != nil {
		return nil, err
	}
	pty, err := env.Shell(ctx, node, record.ShellRC("learner", node))
	if err != nil {
		rec.Close()
		return nil, err
	}
	t := &Terminal{Node: node, pty: pty, rec: rec, path: recPath, log: log,
		subs: map[chan []byte]struct{}{}, lastInput: time.Now(), done: make(chan struct{})}
	go t.pump()
	return t, nil
}

// pump copies the shell's output to the recording, the scrollback and every viewer.
// A viewer too slow to keep up is dropped (its channel closes); the browser reconnects
// and gets the scrollback, so a stalled tab never blocks the shell.
func (t *Terminal) pump() {
	defer close(t.done)
	buf := make([]byte, 32<<10)
	for {
		n, err := t.pty.Read(buf)
		if n > 0 {
			chunk := append([]byte(nil), buf[:n]...)
			if rerr := t.rec.Output(chunk); rerr != nil {
				t.log.Warn("recording", "node", t.Node, "err", rerr)
			}
			t.mu.Lock()
			t.scroll = append(t.scroll, chunk...)
			if len(t.scroll) > scrollbackMax {
				t.scroll = append([]byte(nil), t.scroll[len(t.scroll)-scrollbackMax:]...)
			}
			for ch := range t.subs {
				select {
				case ch <- chunk:
				default:
					delete(t.subs, ch)
					close(ch)
				}
			}
			t.mu.Unlock()
		}
		if err != nil {
			t.mu.Lock()
			for ch := range t.subs {
				close(ch)
			}
			t.subs = map[chan []byte]struct{}{}
			t.closed = true
			t.mu.Unlock()
			return
		}
	}
}

// Attach returns the scrollback and a channel of new output; detach stops it. The
// channel closes when the shell ends or the viewer falls behind.
func (t *Terminal) Attach() (scrollback []byte, out <-chan []byte, detach func()) {
	ch := make(chan []byte, 256)
	t.mu.Lock()
	defer t.mu.Unlock()
	scrollback = append([]byte(nil), t.scroll...)
	if t.closed {
		close(ch)
		return scrollback, ch, func() {}
	}
	t.subs[ch] = struct{}{}
	return scrollback, ch, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if _, ok := t.subs[ch]; ok {
			delete(t.subs, ch)
			close(ch)
		}
	}
}

// Write sends the learner's keystrokes to the shell.
func (t *Terminal) Write(p []byte) (int, error) {
	t.mu.Lock()
	t.lastInput = time.Now()
	t.mu.Unlock()
	_ = t.rec.Input(p)
	return t.pty.Write(p)
}

// Resize changes the terminal size.
func (t *Terminal) Resize(rows, cols uint16) error {
	if rows == 0 || cols == 0 || rows > 500 || cols > 1000 {
		return fmt.Errorf("terminal size %dx%d out of range", cols, rows)
	}
	_ = t.rec.Resize(int(cols), int(rows))
	return t.pty.Resize(rows, cols)
}

// Idle returns how long since the learner last typed.
func (t *Terminal) Idle() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return time.Since(t.lastInput)
}

// Commands parses the commands run so far from the recording on disk.
func (t *Terminal) Commands() ([]record.Command, error) {
	cast, err := record.ReadFile(t.path)
	if err != nil {
		return nil, err
	}
	return cast.Commands(), nil
}

// RecordingPath is where the terminal's asciicast recording is.
func (t *Terminal) RecordingPath() string { return t.path }

// Close ends the shell and finishes the recording.
func (t *Terminal) Close() {
	t.pty.Close()
	select {
	case <-t.done:
	case <-time.After(3 * time.Second):
	}
	t.rec.Close()
}

func (l *Lab) recordingPath(node string) string {
	return filepath.Join(l.cfg.DataDir, "recordings", l.ID, node+".cast")
}

// LastInput is when the learner last typed in any of the lab's terminals (the
// lab's start before that).
func (l *Lab) LastInput() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	last := l.Started
	for _, t := range l.terminals {
		t.mu.Lock()
		if t.lastInput.After(last) {
			last = t.lastInput
		}
		t.mu.Unlock()
	}
	return last
}
