package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// copyTree copies src into a fresh temp dir.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	if out, err := exec.Command("cp", "-r", src+"/.", dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	return dst
}

func edit(t *testing.T, file, old, new string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s lacks %q", file, old)
	}
	if err := os.WriteFile(file, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestContentCheckAuthoring(t *testing.T) {
	t.Run("broken manifest is reported first and alone", func(t *testing.T) {
		dir := copyTree(t, "../../course/content")
		edit(t, filepath.Join(dir, "course.yaml"), "modules:", "modulez:")
		_, probs := loadContentFrom(dir, "")
		if len(probs) == 0 || !strings.HasPrefix(probs[0], filepath.Join(dir, "course.yaml")+":") {
			t.Fatalf("first problem is not the manifest's:\n%s", strings.Join(probs, "\n"))
		}
		if len(probs) > 3 {
			t.Errorf("%d problems for one broken key; want the root only:\n%s", len(probs), strings.Join(probs[:5], "\n"))
		}
	})
	t.Run("scenario files outside the binary, bench argv checked", func(t *testing.T) {
		sc := copyTree(t, "../../scenarios/catalog")
		edit(t, filepath.Join(sc, "ch01-tour.yaml"), "bench: [", "bench: [all_nope, ")
		_, probs := loadContentFrom("", sc)
		joined := strings.Join(probs, "\n")
		if !strings.Contains(joined, filepath.Join(sc, "ch01-tour.yaml")+":") || !strings.Contains(joined, "all_nope") {
			t.Errorf("--scenarios %s: want a file:line problem naming all_nope, got:\n%s", sc, joined)
		}
	})
	t.Run("bench sizes", func(t *testing.T) {
		sc := copyTree(t, "../../scenarios/catalog")
		edit(t, filepath.Join(sc, "ch01-tour.yaml"), "-e, 4M", "-e, 400G")
		_, probs := loadContentFrom("", sc)
		if joined := strings.Join(probs, "\n"); !strings.Contains(joined, "ch01-tour.yaml:") || !strings.Contains(joined, "at most 4G") {
			t.Errorf("want the size refused with file:line, got:\n%s", joined)
		}
	})
}

func TestBenchFlagsCheckedUpFront(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"all_reduce", "-g", "2", "--trace", "/nonexistent-dir/t.json"}, "--trace /nonexistent-dir/t.json: directory /nonexistent-dir does not exist"},
		{[]string{"all_reduce", "-g", "2", "--timeout", "-1"}, "--timeout -1"},
		{[]string{"all_nope", "-g", "2"}, "all_nope"},
	} {
		out, err := cli(t, t.TempDir(), append([]string{"bench"}, tt.args...)...)
		if err == nil || !strings.Contains(err.Error()+out, tt.want) {
			t.Errorf("bench %v = %v\n%s\nwant an error with %q", tt.args, err, out, tt.want)
		}
		if strings.Contains(out, "#  Rank") || strings.Contains(out, "# Avg bus bandwidth") {
			t.Errorf("bench %v ran before refusing:\n%s", tt.args, out)
		}
	}
}
