package labs

import (
	"errors"
	"go/parser"
	"go/token"
	"os/exec"
	"strings"
	"testing"
)

// TestCmd runs real processes through Cmd with a start function that records
// it was used.
func TestCmd(t *testing.T) {
	used := 0
	start := func(c *Cmd) error { used++; return c.Cmd.Start() }

	out, err := NewCmd(exec.Command("echo", "hello"), start).Output()
	if err != nil || string(out) != "hello\n" {
		t.Errorf("Output() = %q, %v", out, err)
	}
	_, err = NewCmd(exec.Command("sh", "-c", "echo oops >&2; exit 3"), start).Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || string(ee.Stderr) != "oops\n" {
		t.Errorf("Output() of a failing command = %v", err)
	}
	out, err = NewCmd(exec.Command("sh", "-c", "echo a; echo b >&2"), start).CombinedOutput()
	if err != nil || string(out) != "a\nb\n" {
		t.Errorf("CombinedOutput() = %q, %v", out, err)
	}
	c := NewCmd(exec.Command("true"), start)
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err == nil {
		t.Error("second Start succeeded")
	}
	if used != 4 {
		t.Errorf("start function used %d times, want 4", used)
	}
	if err := (&Cmd{Cmd: exec.Command("true")}).Start(); err == nil {
		t.Error("a Cmd without a start function started")
	}
}

// TestPackageDocs keeps one package doc comment in each labs package.
func TestPackageDocs(t *testing.T) {
	for _, dir := range []string{".", "topology", "netns", "cgroup"} {
		pkgs, err := parser.ParseDir(token.NewFileSet(), dir, nil, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			t.Fatal(err)
		}
		for name, p := range pkgs {
			if strings.HasSuffix(name, "_test") {
				continue
			}
			docs := 0
			for _, f := range p.Files {
				if f.Doc != nil {
					docs++
				}
			}
			if docs != 1 {
				t.Errorf("package %s (%s) has %d package doc comments, want 1", name, dir, docs)
			}
		}
	}
}
