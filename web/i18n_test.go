package web

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/commlab/commlab/course"
)

// Literal catalogue keys as templates ({{T $lang "key"}}) and Go code
// (web.T(lang, "key"), httpError{status, "key", ...}) use them.
var (
	templateKey = regexp.MustCompile(`\bT\s+[$.][\w.$]*\s+"([^"]+)"`)
	goKey       = regexp.MustCompile(`(?:web\.T\([^,()]+,\s*|httpError\{[^,{}]+,\s*)"([^"]+)"`)
)

// TestCatalogue fails on a missing translation: a catalogue entry without both
// languages, or a key the templates or the server use that the catalogue lacks.
func TestCatalogue(t *testing.T) {
	for key, p := range messages {
		if strings.TrimSpace(p.zh) == "" || strings.TrimSpace(p.en) == "" {
			t.Errorf("catalogue key %q: zh %q, en %q; both languages are needed", key, p.zh, p.en)
		}
		if strings.Count(p.zh, "%") != strings.Count(p.en, "%") {
			t.Errorf("catalogue key %q: zh and en take different numbers of arguments (%q, %q)", key, p.zh, p.en)
		}
	}
	used := map[string]string{} // key -> where
	err := fs.WalkDir(templateFS, "templates", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(templateFS, path)
		for _, m := range templateKey.FindAllStringSubmatchIndex(string(b), -1) {
			used[string(b[m[2]:m[3]])] = path + ":" + lineAt(b, m[0])
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	goFiles, _ := filepath.Glob("../server/*.go")
	more, _ := filepath.Glob("*.go")
	for _, f := range append(goFiles, more...) {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range goKey.FindAllSubmatchIndex(b, -1) {
			used[string(b[m[2]:m[3]])] = f + ":" + lineAt(b, m[0])
		}
	}
	if len(used) < 50 {
		t.Fatalf("found only %d catalogue keys in templates and server code: the patterns no longer match", len(used))
	}
	for key, where := range used {
		if strings.HasSuffix(key, ".") {
			// A prefix completed at run time ("crit."+name): some key must have it;
			// the package that builds the names tests each one.
			if !slices.ContainsFunc(slices.Collect(maps.Keys(messages)), func(k string) bool { return strings.HasPrefix(k, key) }) {
				t.Errorf("%s: no catalogue key starts with %q", where, key)
			}
			continue
		}
		if _, ok := messages[key]; !ok {
			t.Errorf("%s: key %q is not in the catalogue", where, key)
		}
	}
}

// TestCourseTitlesInEnglish: the English UI shows the course, module and chapter
// titles and module summaries in English (the chapter text stays Chinese).
func TestCourseTitlesInEnglish(t *testing.T) {
	crs, probs := course.Load(course.Embedded(), course.Options{})
	if crs == nil {
		t.Fatal(probs)
	}
	if crs.TitleEN == "" {
		t.Error("course.yaml: no title_en")
	}
	for _, m := range crs.Modules {
		if m.TitleEN == "" || m.SummaryEN == "" {
			t.Errorf("course.yaml: module %d lacks title_en or summary_en", m.ID)
		}
		for _, ch := range m.Chapters {
			if ch.TitleEN == "" {
				t.Errorf("course.yaml: chapter %s lacks title_en", ch.ID)
			}
			if ch.TitleIn("en") != ch.TitleEN || ch.TitleIn("zh") != ch.Title {
				t.Errorf("chapter %s: TitleIn picks the wrong language", ch.ID)
			}
		}
	}
}

func lineAt(b []byte, off int) string {
	return strconv.Itoa(strings.Count(string(b[:off]), "\n") + 1)
}
