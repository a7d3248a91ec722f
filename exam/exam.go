// Package exam defines certification exams as files next to the scenarios: the
// rules (time limit, pass mark, attempts, cool-down, hints), sections that draw
// live labs from pools of scenarios and theory questions from chapter quizzes.
// It validates them with file:line problems, draws each attempt's tasks and
// variants from a secret per-attempt seed, and scores attempts.
package exam

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/commlab/commlab/course"
	"github.com/commlab/commlab/internal/yamldecode"
	"github.com/commlab/commlab/scenarios"
)

// Exam is one exam, as written in its file.
type Exam struct {
	ID        string        `yaml:"id"`
	Title     string        `yaml:"title"`
	TitleEN   string        `yaml:"title_en"`
	Rules     string        `yaml:"rules"`      // shown on the start page
	TimeLimit time.Duration `yaml:"time_limit"` // e.g. 90m
	Pass      float64       `yaml:"pass"`       // pass mark, a fraction of the weighted score
	Bands     []Band        `yaml:"bands"`      // above the pass mark, lowest first
	Attempts  int           `yaml:"attempts"`   // per candidate; voided attempts do not count
	Cooldown  time.Duration `yaml:"cooldown"`   // between the end of one attempt and the next
	Hints     Hints         `yaml:"hints"`
	Sections  []Section     `yaml:"sections"`

	File string `yaml:"-"`
}

// Band names a score range on the certificate; the pass mark starts "pass".
type Band struct {
	Name string  `yaml:"name"`
	Min  float64 `yaml:"min"`
}

// Hints says whether a candidate may open a lab's hints, and what each costs,
// as a fraction of that task's score.
type Hints struct {
	Allowed bool    `yaml:"allowed"`
	Cost    float64 `yaml:"cost"`
}

// Section is a weighted part of the exam: live labs drawn from pools, or
// theory questions taken from chapter quizzes ("ch04/q2").
type Section struct {
	ID        string   `yaml:"id"`
	Title     string   `yaml:"title"`
	Weight    float64  `yaml:"weight"`
	Draw      []Pool   `yaml:"draw"`
	Questions []string `yaml:"questions"`
}

// Pool draws Count scenarios from those matching every filter given:
// listed ids, chapters, modules, and tags (position:N, category:X, class:Y,
// env:netns|gpu), less Exclude.
type Pool struct {
	Count     int      `yaml:"count"`
	Scenarios []string `yaml:"scenarios"`
	Chapters  []string `yaml:"chapters"`
	Modules   []int    `yaml:"modules"`
	Tags      []string `yaml:"tags"`
	Exclude   []string `yaml:"exclude"`
}

// Labs is how many live labs an attempt gets.
func (e *Exam) Labs() int {
	n := 0
	for _, s := range e.Sections {
		for _, p := range s.Draw {
			n += p.Count
		}
	}
	return n
}

// BandOf is the band of a passing score ("pass" at the pass mark).
func (e *Exam) BandOf(score float64) string {
	band := "pass"
	for _, b := range e.Bands {
		if score >= b.Min {
			band = b.Name
		}
	}
	return band
}

// TitleIn is the title in the UI language.
func (e *Exam) TitleIn(lang string) string {
	if lang == "en" && e.TitleEN != "" {
		return e.TitleEN
	}
	return e.Title
}

// Tags are the derived tags of a scenario that pools may select on.
func Tags(s *scenarios.Scenario) []string {
	kind := s.Environment.Kind
	if kind == "" {
		kind = "netns"
	}
	tags := []string{"env:" + kind}
	if c, ok := scenarios.ClassByID(s.Diagnosis.Class); ok {
		tags = append(tags, "class:"+c.ID, "category:"+c.Category, "position:"+strconv.Itoa(c.Position))
	}
	return tags
}

// Set is the loaded exams.
type Set struct {
	byID  map[string]*Exam
	order []*Exam
	cat   *scenarios.Catalog
	crs   *course.Course
}

// Get returns the exam with id.
func (s *Set) Get(id string) (*Exam, bool) { e, ok := s.byID[id]; return e, ok }

// All returns the exams in file order.
func (s *Set) All() []*Exam { return s.order }

// Load reads every *.yaml in dir of fsys and checks it against the scenario
// catalogue and the course. Problems are file:line:column.
func Load(fsys fs.FS, dir string, cat *scenarios.Catalog, crs *course.Course) (*Set, []error) {
	set := &Set{byID: map[string]*Exam{}, cat: cat, crs: crs}
	names, err := fs.Glob(fsys, path.Join(dir, "*.yaml"))
	if err != nil {
		return nil, []error{err}
	}
	var probs []error
	for _, n := range names {
		data, err := fs.ReadFile(fsys, n)
		if err != nil {
			probs = append(probs, err)
			continue
		}
		e, ps := Parse(n, data, cat, crs)
		probs = append(probs, ps...)
		if e == nil {
			continue
		}
		if prev, dup := set.byID[e.ID]; dup {
			probs = append(probs, &yamldecode.Error{File: n, Line: 1, Msg: fmt.Sprintf("exam id %q already used by %s", e.ID, prev.File)})
			continue
		}
		set.byID[e.ID] = e
		set.order = append(set.order, e)
	}
	return set, probs
}

var idRe = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,62}$`)

// Parse decodes and validates one exam file.
func Parse(file string, data []byte, cat *scenarios.Catalog, crs *course.Course) (*Exam, []error) {
	var e Exam
	if err := yamldecode.Decode(file, data, 0, &e); err != nil {
		return nil, []error{err}
	}
	e.File = file
	tree, _ := parser.ParseBytes(data, 0)
	v := &validator{file: file, tree: tree}
	v.check(&e, cat, crs)
	if len(v.probs) > 0 {
		return nil, v.probs
	}
	return &e, nil
}

type validator struct {
	file  string
	tree  *ast.File
	probs []error
}

// at reports a problem at the YAML node for a path such as "$.sections[0].weight".
func (v *validator) at(yamlPath, format string, args ...any) {
	e := &yamldecode.Error{File: v.file, Line: 1, Msg: fmt.Sprintf(format, args...)}
	if p, err := yaml.PathString(yamlPath); err == nil && v.tree != nil {
		if n, err := p.FilterFile(v.tree); err == nil && n != nil {
			if tok := n.GetToken(); tok != nil && tok.Position != nil {
				e.Line, e.Column = tok.Position.Line, tok.Position.Column
			}
		}
	}
	v.probs = append(v.probs, e)
}

func (v *validator) check(e *Exam, cat *scenarios.Catalog, crs *course.Course) {
	if !idRe.MatchString(e.ID) {
		v.at("$.id", "id %q: want lower-case letters, digits and '-'", e.ID)
	}
	if strings.TrimSpace(e.Title) == "" {
		v.at("$", "title is required")
	}
	if e.TimeLimit < 5*time.Minute || e.TimeLimit > 8*time.Hour {
		v.at("$.time_limit", "time_limit %v: want between 5m and 8h", e.TimeLimit)
	}
	if e.Pass <= 0 || e.Pass > 1 {
		v.at("$.pass", "pass %v: want a fraction in (0, 1]", e.Pass)
	}
	last := e.Pass
	for i, b := range e.Bands {
		if b.Name == "" || b.Name == "pass" || b.Min <= last || b.Min > 1 {
			v.at(fmt.Sprintf("$.bands[%d]", i), "band %q min %v: want a new name and a min above %v and at most 1", b.Name, b.Min, last)
		}
		last = b.Min
	}
	if e.Attempts < 1 {
		v.at("$.attempts", "attempts %d: want at least 1", e.Attempts)
	}
	if e.Cooldown < 0 {
		v.at("$.cooldown", "cooldown must not be negative")
	}
	if e.Hints.Cost < 0 || e.Hints.Cost > 1 || (!e.Hints.Allowed && e.Hints.Cost != 0) {
		v.at("$.hints", "hints cost %v: want a fraction in [0, 1], and 0 when hints are not allowed", e.Hints.Cost)
	}
	if len(e.Sections) == 0 {
		v.at("$", "an exam needs at least one section")
	}
	sum := 0.0
	seenSec := map[string]bool{}
	claimed := map[string]string{} // scenario → pool that may draw it
	for i, s := range e.Sections {
		at := fmt.Sprintf("$.sections[%d]", i)
		sum += s.Weight
		if !idRe.MatchString(s.ID) || seenSec[s.ID] {
			v.at(at+".id", "section id %q: want a unique lower-case id", s.ID)
		}
		seenSec[s.ID] = true
		if s.Weight <= 0 {
			v.at(at+".weight", "weight %v: want more than 0", s.Weight)
		}
		if (len(s.Draw) == 0) == (len(s.Questions) == 0) {
			v.at(at, "a section has either draw (live labs) or questions (theory), not both or neither")
		}
		for j, p := range s.Draw {
			pat := fmt.Sprintf("%s.draw[%d]", at, j)
			cands, bad := p.candidates(cat, crs)
			for _, b := range bad {
				v.at(pat, "%s", b)
			}
			if p.Count < 1 || p.Count > len(cands) {
				v.at(pat+".count", "count %d: the pool has %d scenario(s) %v", p.Count, len(cands), cands)
			}
			for _, id := range cands {
				if other, ok := claimed[id]; ok {
					v.at(pat, "scenario %s is in this pool and in %s: pools must not overlap, so every draw succeeds", id, other)
				}
				claimed[id] = pat
			}
		}
		seenQ := map[string]bool{}
		for j, ref := range s.Questions {
			if seenQ[ref] {
				v.at(fmt.Sprintf("%s.questions[%d]", at, j), "question %s listed twice", ref)
			}
			seenQ[ref] = true
			if _, err := Question(crs, ref); err != nil {
				v.at(fmt.Sprintf("%s.questions[%d]", at, j), "%v", err)
			}
		}
	}
	if len(e.Sections) > 0 && (sum < 0.999 || sum > 1.001) {
		v.at("$.sections", "section weights add up to %v, want 1", sum)
	}
}

// candidates lists the scenarios a pool may draw, sorted, and what in the
// pool names nothing that exists.
func (p Pool) candidates(cat *scenarios.Catalog, crs *course.Course) ([]string, []string) {
	var bad []string
	chapterOK := map[string]bool{}
	for _, id := range p.Chapters {
		if _, ok := crs.Chapter(id); !ok {
			bad = append(bad, fmt.Sprintf("no chapter %q", id))
		}
		chapterOK[id] = true
	}
	for _, m := range p.Modules {
		found := false
		for _, mod := range crs.Modules {
			if mod.ID == m {
				found = true
				for _, ch := range mod.Chapters {
					chapterOK[ch.ID] = true
				}
			}
		}
		if !found {
			bad = append(bad, fmt.Sprintf("no module %d", m))
		}
	}
	for _, id := range append(slices.Clone(p.Scenarios), p.Exclude...) {
		if _, ok := cat.Get(id); !ok {
			bad = append(bad, fmt.Sprintf("no scenario %q", id))
		}
	}
	var out []string
	for _, s := range cat.All() {
		if len(p.Scenarios) > 0 && !slices.Contains(p.Scenarios, s.ID) ||
			len(chapterOK) > 0 && !chapterOK[s.Chapter] ||
			slices.Contains(p.Exclude, s.ID) {
			continue
		}
		tags := Tags(s)
		all := true
		for _, t := range p.Tags {
			all = all && slices.Contains(tags, t)
		}
		if all {
			out = append(out, s.ID)
		}
	}
	sort.Strings(out)
	return out, bad
}

// Question returns the quiz question named "chapter/question-id".
func Question(crs *course.Course, ref string) (*course.Question, error) {
	chID, qID, ok := strings.Cut(ref, "/")
	if !ok {
		return nil, fmt.Errorf("question %q: want chapter/question-id, e.g. ch04/q2", ref)
	}
	ch, found := crs.Chapter(chID)
	if !found || ch.Quiz == nil {
		return nil, fmt.Errorf("question %q: chapter %s has no quiz", ref, chID)
	}
	for _, q := range ch.Quiz.Questions {
		if q.ID == qID {
			return q, nil
		}
	}
	return nil, fmt.Errorf("question %q: the quiz of %s has no question %s", ref, chID, qID)
}
