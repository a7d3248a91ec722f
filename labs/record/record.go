// Package record writes and reads terminal recordings in asciicast v2 format (what was
// printed and typed, with times), and splits them into the commands a learner ran, using
// markers that commlab's lab shell prints around every command. The grader reads evidence
// from these recordings, never from text the learner submits.
package record

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Header is the first line of an asciicast v2 file.
type Header struct {
	Version   int               `json:"version"`
	Width     int               `json:"width"`
	Height    int               `json:"height"`
	Timestamp int64             `json:"timestamp,omitempty"`
	Title     string            `json:"title,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
}

// Event is one recorded event: seconds since the start, a code ("o" output, "i" input,
// "r" resize, "m" marker) and its data.
type Event struct {
	Time float64
	Code string
	Data string
}

// Writer appends events to an asciicast v2 file. It is safe for concurrent use.
type Writer struct {
	mu    sync.Mutex
	f     *os.File
	w     *bufio.Writer
	start time.Time
	err   error
}

// Create starts a recording at path (mode 0600: recordings are the learner's own).
func Create(path string, h Header) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create recording: %w", err)
	}
	h.Version = 2
	start := time.Now()
	if h.Timestamp == 0 {
		h.Timestamp = start.Unix()
	}
	w := &Writer{f: f, w: bufio.NewWriter(f), start: start}
	line, err := json.Marshal(h)
	if err != nil {
		f.Close()
		return nil, err
	}
	w.w.Write(append(line, '\n'))
	if err := w.w.Flush(); err != nil {
		f.Close()
		return nil, fmt.Errorf("create recording: %w", err)
	}
	return w, nil
}

// Output records bytes the terminal printed.
func (w *Writer) Output(p []byte) error { return w.event("o", string(p)) }

// Input records bytes the learner typed.
func (w *Writer) Input(p []byte) error { return w.event("i", string(p)) }

// Resize records a terminal resize.
func (w *Writer) Resize(cols, rows int) error { return w.event("r", fmt.Sprintf("%dx%d", cols, rows)) }

func (w *Writer) event(code, data string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	line, err := json.Marshal([]any{roundTime(time.Since(w.start).Seconds()), code, data})
	if err != nil {
		return err
	}
	if _, err := w.w.Write(append(line, '\n')); err != nil {
		w.err = err
	}
	// Output is flushed at once so evidence is on disk the moment it is shown.
	if err := w.w.Flush(); err != nil && w.err == nil {
		w.err = err
	}
	return w.err
}

func roundTime(s float64) float64 { return float64(int64(s*1e6)) / 1e6 }

// Close flushes and closes the file.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.w.Flush()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if w.err == nil {
		w.err = errors.New("recording closed")
	}
	return err
}

// Cast is a parsed recording.
type Cast struct {
	Header Header
	Events []Event
}

// Read parses an asciicast v2 stream. A truncated last line (a crash mid-write) is
// ignored; any other malformed line is an error naming its line number.
func Read(r io.Reader) (*Cast, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	c := &Cast{}
	line := 0
	var pending error
	for sc.Scan() {
		line++
		if pending != nil {
			return nil, pending
		}
		b := sc.Bytes()
		if line == 1 {
			if err := json.Unmarshal(b, &c.Header); err != nil {
				return nil, fmt.Errorf("recording line 1: header: %w", err)
			}
			if c.Header.Version != 2 {
				return nil, fmt.Errorf("recording line 1: asciicast version %d, want 2", c.Header.Version)
			}
			continue
		}
		var raw []json.RawMessage
		var e Event
		if err := json.Unmarshal(b, &raw); err != nil || len(raw) != 3 ||
			json.Unmarshal(raw[0], &e.Time) != nil || json.Unmarshal(raw[1], &e.Code) != nil || json.Unmarshal(raw[2], &e.Data) != nil {
			pending = fmt.Errorf("recording line %d: not an asciicast event", line)
			continue
		}
		c.Events = append(c.Events, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read recording: %w", err)
	}
	if line == 0 {
		return nil, errors.New("recording is empty")
	}
	return c, nil
}

// ReadFile parses the recording at path.
func ReadFile(path string) (*Cast, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f)
}
