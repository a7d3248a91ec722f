package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/commlab/commlab/internal/pgtest"
	"github.com/commlab/commlab/server/store"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&out)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func TestContentCheckEmbedded(t *testing.T) {
	out, err := run(t, "content", "check")
	if err != nil {
		t.Fatalf("embedded course: %v\n%s", err, out)
	}
	if !strings.Contains(out, "ok: 6 modules, 30 chapters") || !strings.Contains(out, "lab scenarios") {
		t.Errorf("output: %s", out)
	}
}

// A chapter with broken front matter stops both content check and serve, naming file:line.
func TestBrokenFrontMatterStopsCheckAndServe(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("course.yaml", "title: T\nmodules:\n  - id: 1\n    title: M\n    chapters:\n      - {id: ch01, title: 一}\n")
	write("chapters/ch01.md", "---\nid: ch01\ntitle: 一\nmodule: one\norder: 1\n---\n## x\n")
	want := filepath.Join(dir, "chapters/ch01.md") + ":4:"

	out, err := run(t, "content", "check", "--content", dir)
	if err == nil || !strings.Contains(out, want) {
		t.Errorf("content check: err %v, output %q, want a line starting %q", err, out, want)
	}
	_, err = run(t, "serve", "--content", dir, "--addr", "127.0.0.1:0", "--data", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("serve: err %v, want it to name chapters/ch01.md:4", err)
	}
}

// TestUserRole runs the user commands on each store: the SQLite file in --data
// and a PostgreSQL database named by --store.
func TestUserRole(t *testing.T) {
	for _, tc := range []struct {
		name  string
		where func(t *testing.T) (flags []string, spec string)
	}{
		{"sqlite", func(t *testing.T) ([]string, string) {
			data := t.TempDir()
			return []string{"--data", data}, filepath.Join(data, "commlab.db")
		}},
		{"postgres", func(t *testing.T) ([]string, string) {
			pg := pgtest.Start(t)
			url := pg.URL(pg.NewDB(t))
			return []string{"--data", t.TempDir(), "--store", url}, url
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			flags, spec := tc.where(t)
			st, err := store.Open(context.Background(), spec)
			if err != nil {
				t.Fatal(err)
			}
			if err := st.CreateUser(context.Background(), &store.User{Email: "ann@example.com", Name: "Ann", Role: store.RoleLearner, PasswordHash: "x"}); err != nil {
				t.Fatal(err)
			}
			st.Close()
			cmd := func(args ...string) (string, error) { return run(t, append(flags, args...)...) }
			if out, err := cmd("user", "role", "Ann@Example.com", "instructor"); err != nil || !strings.Contains(out, "now instructor") {
				t.Fatalf("user role: %v %s", err, out)
			}
			out, err := cmd("user", "list")
			if err != nil || !strings.Contains(out, "ann@example.com") || !strings.Contains(out, "instructor") {
				t.Errorf("user list: %v\n%s", err, out)
			}
			if _, err := cmd("user", "role", "ann@example.com", "root"); err == nil || !strings.Contains(err.Error(), "want learner, instructor or admin") {
				t.Errorf("bad role: %v", err)
			}
			if _, err := cmd("user", "role", "nobody@example.com", "admin"); err == nil {
				t.Error("unknown account accepted")
			}
		})
	}
}

func runCmd(name string, args ...string) ([]byte, error) {
	return exec.Command(name, args...).CombinedOutput()
}

// A bad cluster section stops serve before anything starts, naming the file and
// what is wrong.
func TestServeConfigErrors(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"unknown key", "cluster:\n  partiton: gpu\n", "partiton"},
		{"no agent url", "cluster:\n  partition: gpu\n", "agent_url is required"},
		{"option smuggled into sbatch", "cluster:\n  account: \"ml --uid=0\"\n  agent_url: ws://login1:8081/agent\n", `account "ml --uid=0"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "commlab.yaml")
			if err := os.WriteFile(p, []byte(tt.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := run(t, "serve", "--config", p, "--addr", "127.0.0.1:0", "--data", t.TempDir())
			if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("serve: err %v, want one naming %s and %q", err, p, tt.want)
			}
		})
	}
}

// TestServeChartRunsFlag: a negative --chart-runs is refused before anything starts.
func TestServeChartRunsFlag(t *testing.T) {
	_, err := run(t, "serve", "--chart-runs", "-1", "--addr", "127.0.0.1:0", "--data", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "--chart-runs -1") {
		t.Errorf("serve --chart-runs -1: err %v, want one naming the flag", err)
	}
}
