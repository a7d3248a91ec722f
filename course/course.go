// Package course loads the commlab course — a manifest of modules and chapters plus one
// Markdown file per chapter with YAML front matter and an optional quiz — validates it,
// and renders every chapter to HTML once, so pages are served from memory.
package course

import (
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/commlab/commlab/internal/boundedread"
	"github.com/commlab/commlab/internal/yamldecode"
)

// Paths inside a content tree.
const (
	ManifestFile = "course.yaml"
	ChapterDir   = "chapters"
	QuizDir      = "quizzes"
	AssetDir     = "assets"
)

// Course is a loaded, rendered course. It is immutable once loaded.
type Course struct {
	Title   string
	TitleEN string
	Modules []*Module
	// Assets serves the files under assets/ (images, diagrams).
	Assets fs.FS

	byID     map[string]*Chapter
	ordered  []*Chapter
	quizHTML map[string]template.HTML
}

// Module is one of the course's six parts.
type Module struct {
	ID                 int
	Title, TitleEN     string
	Summary, SummaryEN string
	Chapters           []*Chapter
}

// TitleIn is the course title in the UI language lang ("en" or Chinese).
func (c *Course) TitleIn(lang string) string { return inLang(lang, c.Title, c.TitleEN) }

// TitleIn is the module title in the UI language lang.
func (m *Module) TitleIn(lang string) string { return inLang(lang, m.Title, m.TitleEN) }

// SummaryIn is the module summary in the UI language lang.
func (m *Module) SummaryIn(lang string) string { return inLang(lang, m.Summary, m.SummaryEN) }

// TitleIn is the chapter title in the UI language lang. The chapter text itself is
// Chinese only for now.
func (ch *Chapter) TitleIn(lang string) string { return inLang(lang, ch.Title, ch.TitleEN) }

func inLang(lang, zh, en string) string {
	if lang == "en" && en != "" {
		return en
	}
	return zh
}

// Chapter is one chapter. A chapter listed in the manifest without a file is not yet
// written: it has no HTML and is shown as 编写中.
type Chapter struct {
	ID      string
	Title   string
	TitleEN string
	Module  int
	Order   int
	Labs    []string
	File    string // path inside the content tree; empty when not written

	HTML template.HTML
	TOC  []Heading
	Quiz *Quiz

	// Prev and Next are the neighbouring written chapters in course order.
	Prev, Next *Chapter
}

// Written reports whether the chapter has content.
func (c *Chapter) Written() bool { return c.File != "" }

// Heading is an entry of a chapter's table of contents.
type Heading struct {
	Level int // 2 or 3
	ID    string
	Text  string
}

// Chapter returns the chapter with the given id.
func (c *Course) Chapter(id string) (*Chapter, bool) {
	ch, ok := c.byID[id]
	return ch, ok
}

// Chapters returns every chapter in course order.
func (c *Course) Chapters() []*Chapter { return c.ordered }

// Options tune loading.
type Options struct {
	// LabExists reports whether a lab id names a known scenario. Nil means no lab is known,
	// so any lab id in front matter is reported.
	LabExists func(id string) bool
}

// Problem is one thing wrong with the content, located as file:line.
type Problem struct {
	File string
	Line int
	Msg  string
}

func (p Problem) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg)
	}
	return fmt.Sprintf("%s: %s", p.File, p.Msg)
}

// Problems is a list of content problems; as an error it lists them one per line.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

func (ps *Problems) add(file string, line int, format string, args ...any) {
	*ps = append(*ps, Problem{File: file, Line: line, Msg: fmt.Sprintf(format, args...)})
}

// addErr records a decoding error, keeping its position when it has one.
func (ps *Problems) addErr(file string, err error) {
	var ye *yamldecode.Error
	if errors.As(err, &ye) {
		*ps = append(*ps, Problem{File: ye.File, Line: ye.Line, Msg: ye.Msg})
		return
	}
	ps.add(file, 0, "%v", err)
}

type manifest struct {
	Title   string `yaml:"title"`
	TitleEN string `yaml:"title_en"`
	Modules []struct {
		ID        int    `yaml:"id"`
		Title     string `yaml:"title"`
		TitleEN   string `yaml:"title_en"`
		Summary   string `yaml:"summary"`
		SummaryEN string `yaml:"summary_en"`
		Chapters  []struct {
			ID      string `yaml:"id"`
			Title   string `yaml:"title"`
			TitleEN string `yaml:"title_en"`
		} `yaml:"chapters"`
	} `yaml:"modules"`
}

// Load reads, validates and renders the course in fsys. It returns the course and every
// problem found; a course with problems must not be served (content check prints them).
func Load(fsys fs.FS, opts Options) (*Course, Problems) {
	var probs Problems
	data, err := boundedread.FS(fsys, ManifestFile, boundedread.Config)
	if err != nil {
		probs.add(ManifestFile, 0, "cannot read the manifest: %v", err)
		return nil, probs
	}
	var m manifest
	if err := yamldecode.Decode(ManifestFile, data, 0, &m); err != nil {
		probs.addErr(ManifestFile, err)
		return nil, probs
	}
	assets, err := fs.Sub(fsys, AssetDir)
	if err != nil {
		probs.add(AssetDir, 0, "%v", err)
		return nil, probs
	}
	if len(m.Modules) == 0 {
		// Every chapter and lab would follow with an error of its own: this one is the root.
		probs.add(ManifestFile, 1, "the manifest lists no modules (is the modules: key missing or misindented?)")
		return nil, probs
	}
	c := &Course{Title: m.Title, TitleEN: m.TitleEN, Assets: assets, byID: map[string]*Chapter{}}
	if m.Title == "" {
		probs.add(ManifestFile, 1, "the course has no title")
	}
	seenModule := map[int]bool{}
	for _, mm := range m.Modules {
		if seenModule[mm.ID] {
			probs.add(ManifestFile, lineOf(data, fmt.Sprintf("id: %d", mm.ID), 2), "duplicate module id %d", mm.ID)
		}
		seenModule[mm.ID] = true
		mod := &Module{ID: mm.ID, Title: mm.Title, TitleEN: mm.TitleEN, Summary: mm.Summary, SummaryEN: mm.SummaryEN}
		for i, mc := range mm.Chapters {
			if _, dup := c.byID[mc.ID]; dup {
				probs.add(ManifestFile, lineOf(data, "id: "+mc.ID, 2), "duplicate chapter id %q", mc.ID)
				continue
			}
			if !validID(mc.ID) {
				probs.add(ManifestFile, lineOf(data, "id: "+mc.ID, 1), "chapter id %q: use lower-case letters, digits and '-'", mc.ID)
				continue
			}
			ch := &Chapter{ID: mc.ID, Title: mc.Title, TitleEN: mc.TitleEN, Module: mm.ID, Order: i + 1}
			mod.Chapters = append(mod.Chapters, ch)
			c.byID[ch.ID] = ch
			c.ordered = append(c.ordered, ch)
		}
		c.Modules = append(c.Modules, mod)
	}

	files, _ := fs.Glob(fsys, path.Join(ChapterDir, "*.md"))
	sort.Strings(files)
	r := newRenderer(fsys, c)
	for _, f := range files {
		id := strings.TrimSuffix(path.Base(f), ".md")
		ch, ok := c.byID[id]
		if !ok {
			probs.add(f, 1, "chapter %q is not listed in %s", id, ManifestFile)
			continue
		}
		ch.File = f
	}
	for _, ch := range c.ordered {
		if ch.Written() {
			loadChapter(fsys, ch, r, opts, &probs)
		}
	}
	r.checkAnchors(&probs)

	var prev *Chapter
	for _, ch := range c.ordered {
		if !ch.Written() {
			continue
		}
		if prev != nil {
			prev.Next, ch.Prev = ch, prev
		}
		prev = ch
	}
	return c, probs
}

func loadChapter(fsys fs.FS, ch *Chapter, r *renderer, opts Options, probs *Problems) {
	src, err := boundedread.FS(fsys, ch.File, boundedread.Page)
	if err != nil {
		probs.add(ch.File, 0, "%v", err)
		return
	}
	fm, body, bodyLine, err := splitFrontMatter(ch.File, src)
	if err != nil {
		probs.addErr(ch.File, err)
		return
	}
	fm.check(ch, src, opts, probs)
	ch.Labs = fm.Labs
	if fm.Quiz != "" {
		q, qprobs := loadQuiz(fsys, path.Join(QuizDir, fm.Quiz), r)
		*probs = append(*probs, qprobs...)
		ch.Quiz = q
	}
	ch.HTML, ch.TOC = r.render(ch, body, bodyLine, probs)
}

func validID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// lineOf returns the 1-based line of the nth occurrence of needle in data, or 0.
func lineOf(data []byte, needle string, nth int) int {
	s := string(data)
	off := 0
	for n := 0; n < nth; n++ {
		i := strings.Index(s[off:], needle)
		if i < 0 {
			return 0
		}
		off += i
		if n < nth-1 {
			off += len(needle)
		}
	}
	return strings.Count(s[:off], "\n") + 1
}
