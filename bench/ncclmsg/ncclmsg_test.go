package ncclmsg

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const fixture = "../../nccl/testdata/nccl-formats.txt"

// literalAt returns the C string literal(s) that start on line n (1-based) of
// src, adjacent literals joined, escapes \" and \\ undone.
func literalAt(src string, n int) (string, error) {
	lines := strings.Split(src, "\n")
	if n < 1 || n > len(lines) {
		return "", fmt.Errorf("no line %d", n)
	}
	rest := strings.Join(lines[n-1:], "\n")
	i := strings.IndexByte(rest, '"')
	if i < 0 || strings.Contains(rest[:i], "\n") {
		return "", fmt.Errorf("no string literal on line %d: %q", n, lines[n-1])
	}
	var b strings.Builder
	rest = rest[i:]
	for strings.HasPrefix(rest, `"`) {
		j := 1
		for ; j < len(rest) && rest[j] != '"'; j++ {
			if rest[j] == '\\' {
				j++
			}
		}
		s, err := strconv.Unquote(rest[:j+1])
		if err != nil {
			return "", err
		}
		b.WriteString(s)
		rest = strings.TrimLeft(rest[j+1:], " \t\n")
	}
	return b.String(), nil
}

// readFixture maps "tag src" to the literal recorded from the tagged source.
func readFixture(t *testing.T) map[string]string {
	f, err := os.Open(fixture)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, lit, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("%s:%d: want <tag> <file:line><TAB><literal as Go quotes it>", fixture, n)
		}
		s, err := strconv.Unquote(lit)
		if err != nil {
			t.Fatalf("%s:%d: %v", fixture, n, err)
		}
		out[key] = s
	}
	return out
}

// composed are messages whose format NCCL builds from a macro: the recorded
// literal is the format's beginning.
var composed = map[string]bool{VersionBanner.Src: true}

// TestFormatsMatchSource: every message the emulation prints has NCCL's format,
// file and line in the release it names, as recorded in nccl/testdata. With
// COMMLAB_NCCL_SRC=<a clone of NVIDIA/nccl with its tags>, the record itself is
// checked against the tagged source (COMMLAB_NCCL_UPDATE=1 rewrites it).
func TestFormatsMatchSource(t *testing.T) {
	if repo := os.Getenv("COMMLAB_NCCL_SRC"); repo != "" {
		var b strings.Builder
		b.WriteString("# NCCL format strings, by release tag and src/ file:line, read with\n# `git show <tag>:src/<file>` from github.com/NVIDIA/nccl; see bench/ncclmsg.\n")
		for _, m := range All() {
			file, line, _ := strings.Cut(m.Src, ":")
			n, _ := strconv.Atoi(line)
			src, err := exec.Command("git", "-C", repo, "show", m.Tag+":src/"+file).Output()
			if err != nil {
				t.Fatalf("git show %s:src/%s: %v", m.Tag, file, err)
			}
			lit, err := literalAt(string(src), n)
			if err != nil {
				t.Fatalf("%s %s: %v", m.Tag, m.Src, err)
			}
			fmt.Fprintf(&b, "%s %s\t%s\n", m.Tag, m.Src, strconv.Quote(lit))
		}
		if os.Getenv("COMMLAB_NCCL_UPDATE") == "1" {
			if err := os.WriteFile(filepath.FromSlash(fixture), []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
		} else if old, _ := os.ReadFile(fixture); string(old) != b.String() {
			t.Errorf("%s differs from the tagged source; want:\n%s", fixture, b.String())
		}
	}
	rec := readFixture(t)
	for _, m := range All() {
		lit, ok := rec[m.Tag+" "+m.Src]
		switch {
		case !ok:
			t.Errorf("%s %s (%q): not in %s", m.Tag, m.Src, m.Format, fixture)
		case composed[m.Src] && !strings.HasPrefix(m.Format, lit):
			t.Errorf("%s %s: format %q does not start with NCCL's %q", m.Tag, m.Src, m.Format, lit)
		case !composed[m.Src] && m.Format != lit:
			t.Errorf("%s %s: format %q, NCCL's is %q", m.Tag, m.Src, m.Format, lit)
		}
	}
}

func TestGoFormat(t *testing.T) {
	for _, tc := range []struct{ c, want string }{
		{"%s set by environment to %lld.", "%s set by environment to %d."},
		{"comm %p busId %lx commId 0x%llx", "comm %#x busId %x commId 0x%x"},
		{"Channel %02d/%01d : sleep %u msec (%d/%ld) 100%%", "Channel %02d/%01d : sleep %d msec (%d/%d) 100%%"},
	} {
		if got := goFormat(tc.c); got != tc.want {
			t.Errorf("goFormat(%q) = %q, want %q", tc.c, got, tc.want)
		}
	}
}

func TestParseRelease(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		retry    bool
	}{{"2.28", "2.28.9", true}, {"2.28.9", "2.28.9", true}, {"2.27.3", "2.27.7", true}, {"2.26", "2.26.6", false}, {"2.24", "2.24.3", false}, {"2.23", "", false}, {"3", "", false}} {
		r, err := ParseRelease(tc.in)
		if got := ""; err == nil {
			got = r.String()
			if got != tc.want || r.RetriesOnTimeout() != tc.retry {
				t.Errorf("ParseRelease(%q) = %s (retries on timeout %v), want %s (%v)", tc.in, got, r.RetriesOnTimeout(), tc.want, tc.retry)
			}
		} else if tc.want != "" || !strings.Contains(err.Error(), "2.24 to 2.28") {
			t.Errorf("ParseRelease(%q): %v", tc.in, err)
		}
	}
}

// TestRecordedLines: lines real NCCL printed (the H200 recording, NCCL 2.28.9,
// and lines from public logs) match the formats, so a format the emulation
// prints is one NCCL prints.
func TestRecordedLines(t *testing.T) {
	var lines []string
	for _, f := range []string{"h200/nccl-info.log", "public/net-socket-send.log", "public/socket-abort.log"} {
		b, err := os.ReadFile("../../nccl/testdata/" + f)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.Split(string(b), "\n")...)
	}
	body := func(l string) string { // after "host:pid:tid [dev] NCCL INFO "
		if _, rest, ok := strings.Cut(l, " NCCL INFO "); ok {
			return rest
		}
		return ""
	}
	for _, tc := range []struct {
		m      Msg
		prefix bool // the format is the line's beginning
	}{
		{Bootstrap, false}, {IBNoDevice, false}, {IBUsing, false}, {PluginFailed, false}, {PluginInit, false},
		{PluginAssign, false}, {SocketUsing, false}, {UsingNetwork, false}, {EnvParam, false}, {InitStart, false},
		{InitComplete, false}, {Trees, false}, {P2PChunksize, false}, {RingPrefix, true}, {ViaNetSend, false},
		{ViaSHM, false}, {VersionBanner, true},
	} {
		re := tc.m.Regexp().String()
		if tc.prefix {
			re = strings.TrimSuffix(re, "$")
		}
		found := ""
		for _, l := range lines {
			if b := body(l); b != "" && regexpMatch(re, b) {
				found = l
				break
			}
		}
		if found == "" {
			t.Errorf("%s %q: no recorded line matches %s", tc.m.Src, tc.m.Format, re)
		}
	}
	warn := strings.TrimSuffix(WarnPrefix.Regexp().String(), "$")
	n := 0
	for _, l := range lines {
		if i := strings.Index(l, " ["); i > 0 && strings.Contains(l, "NCCL WARN") {
			n++
			if !regexpMatch(warn, l[i+1:]) {
				t.Errorf("recorded WARN line %q does not match %s", l, warn)
			}
		}
	}
	if n == 0 {
		t.Error("no recorded WARN line")
	}
}

func regexpMatch(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }
