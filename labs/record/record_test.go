package record

import (
	"bytes"
	"encoding/base64"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// TestRealShell runs bash with the lab rc in a real PTY, records it, and splits the
// recording into commands.
func TestRealShell(t *testing.T) {
	dir := t.TempDir()
	rc := filepath.Join(dir, "rc")
	if err := os.WriteFile(rc, []byte(ShellRC("learner", "node1")), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "--noprofile", "--rcfile", rc, "-i")
	cmd.Env = []string{"PATH=/usr/bin:/bin:/usr/sbin:/sbin", "TERM=xterm-256color", "HOME=" + dir}
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 120})
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer cmd.Process.Kill()

	w, err := Create(filepath.Join(dir, "cast"), Header{Width: 120, Height: 40})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var seen bytes.Buffer
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			if n > 0 {
				w.Output(buf[:n])
				seen.Write(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}()
	fake := base64.StdEncoding.EncodeToString([]byte("tc -s qdisc show dev rdma0"))
	lines := []string{
		"echo hello; echo world",
		"false",
		"PS0=x",
		`printf '\033]6973;E;` + fake + `\007\033]6973;C\007qdisc tbf 8001: root rate 80Mbit\n\033]6973;D;0\007'`,
		"printf 'a\\rb\\n'",
		"exit",
	}
	for _, l := range lines {
		w.Input([]byte(l + "\n"))
		if _, err := io.WriteString(ptmx, l+"\n"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(150 * time.Millisecond)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("shell did not exit")
	}
	w.Close()

	cast, err := ReadFile(filepath.Join(dir, "cast"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(seen.String(), "learner@node1") {
		t.Errorf("prompt does not name the node: %q", seen.String())
	}
	cmds := cast.Commands()
	if len(cmds) < 5 {
		t.Fatalf("got %d commands, want 5+: %+v", len(cmds), cmds)
	}
	want := []struct {
		line, output string
		exit         int
		tampered     bool
	}{
		{"echo hello; echo world", "hello\nworld", 0, false},
		{"false", "", 1, false},
		{"PS0=x", "readonly variable", 1, false},
		{"printf", "", 0, true},
		{"printf 'a\\rb\\n'", "b", 0, false},
	}
	for i, w := range want {
		c := cmds[i]
		if c.Seq != i+1 || !strings.HasPrefix(c.Line, w.line) || !strings.Contains(c.Output, w.output) || c.Exit != w.exit || c.Tampered != w.tampered {
			t.Errorf("command %d = %+v, want line %q output ~%q exit %d tampered %v", i+1, c, w.line, w.output, w.exit, w.tampered)
		}
	}
	for _, c := range cmds {
		if strings.HasPrefix(c.Line, "tc ") {
			t.Errorf("a forged marker became a command: %+v", c)
		}
	}
}

func TestReadErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", "empty"},
		{"bad header", "{\n", "line 1"},
		{"version 1", `{"version":1,"width":80,"height":24}` + "\n", "version 1"},
		{"bad event", `{"version":2,"width":80,"height":24}` + "\n[1,\"o\"]\n[2,\"o\",\"x\"]\n", "line 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
	// A crash can cut the last line short: that is not an error.
	c, err := Read(strings.NewReader(`{"version":2,"width":80,"height":24}` + "\n[0.1,\"o\",\"x\"]\n[0.2,\"o\""))
	if err != nil || len(c.Events) != 1 {
		t.Errorf("truncated tail: %v, %d events", err, len(c.Events))
	}
}

func TestClean(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"\x1b[1;32mok\x1b[0m\r\n", "ok\n"},
		{"50%\r100%\r\n", "100%\n"},
		{"\x1b]0;title\x07text", "text"},
		{"a\x07b", "ab"},
	} {
		if got := Clean(tt.in); got != tt.want {
			t.Errorf("Clean(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// A recording with nothing in it yet (graded at once) is still a valid, empty one.
func TestEmptyRecording(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cast")
	w, err := Create(p, Header{Width: 80, Height: 24})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	c, err := ReadFile(p)
	if err != nil || len(c.Commands()) != 0 {
		t.Fatalf("fresh recording: %v", err)
	}
}
