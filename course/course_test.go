package course

import (
	"io/fs"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/commlab/commlab/scenarios"
)

const manifestYAML = `title: T
modules:
  - id: 1
    title: M1
    chapters:
      - {id: ch01, title: 第一章}
      - {id: ch02, title: 第二章}
      - {id: ch03, title: 第三章}
`

const ch01 = `---
id: ch01
title: 第一章
module: 1
order: 1
labs: []
quiz: ch01.yaml
---
## 为什么要学

正文，见 [第二章](ch02.md#带宽-busbw) 与 ![图](../assets/a.svg)。

| 列 | 值 |
|---|---|
| busbw | 2(n-1)/n |

` + "```python\nimport torch.distributed as dist\n```\n" + `
### 小节 One
`

const ch02 = `---
id: ch02
title: 第二章
module: 1
order: 2
labs: []
---
## 带宽 busbw

回到 [第一章](ch01.md)。
`

const quizYAML = `pass: 0.6
questions:
  - id: q1
    type: single
    prompt: "选一个"
    options: ["a", "b", "c"]
    answer: 1
    explanation: "b 对"
  - id: q2
    type: multiple
    prompt: "选多个"
    options: ["a", "b", "c"]
    answer: [0, 2]
    explanation: "a 和 c"
  - id: q3
    type: numeric
    prompt: "busbw?"
    answer: 175
    tolerance: 0.02
    unit: GB/s
    explanation: "100 × 2 × 7/8"
`

func goodFS() fstest.MapFS {
	return fstest.MapFS{
		"course.yaml":       {Data: []byte(manifestYAML)},
		"chapters/ch01.md":  {Data: []byte(ch01)},
		"chapters/ch02.md":  {Data: []byte(ch02)},
		"quizzes/ch01.yaml": {Data: []byte(quizYAML)},
		"assets/a.svg":      {Data: []byte("<svg/>")},
	}
}

func TestLoadRenders(t *testing.T) {
	c, probs := Load(goodFS(), Options{})
	if len(probs) > 0 {
		t.Fatalf("problems: %v", probs)
	}
	ch, ok := c.Chapter("ch01")
	if !ok || !ch.Written() {
		t.Fatal("ch01 missing")
	}
	html := string(ch.HTML)
	for _, want := range []string{
		`<h2 id="为什么要学">为什么要学</h2>`,
		`<table>`, `<td>busbw</td>`,
		`<pre class="chroma">`, `<span class="kn">import</span>`,
		`href="/course/ch02#%E5%B8%A6%E5%AE%BD-busbw"`,
		`src="/course/assets/a.svg"`,
		`<h3 id="小节-one">`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("rendered ch01 lacks %q\n%s", want, html)
		}
	}
	wantTOC := []Heading{{2, "为什么要学", "为什么要学"}, {3, "小节-one", "小节 One"}}
	if len(ch.TOC) != len(wantTOC) {
		t.Fatalf("TOC = %+v, want %+v", ch.TOC, wantTOC)
	}
	for i := range wantTOC {
		if ch.TOC[i] != wantTOC[i] {
			t.Errorf("TOC[%d] = %+v, want %+v", i, ch.TOC[i], wantTOC[i])
		}
	}
	ch02, _ := c.Chapter("ch02")
	ch03, _ := c.Chapter("ch03")
	if ch.Next != ch02 || ch02.Prev != ch || ch02.Next != nil {
		t.Errorf("prev/next links wrong: ch01.Next=%v ch02.Prev=%v", ch.Next, ch02.Prev)
	}
	if ch03.Written() || ch03.HTML != "" {
		t.Error("ch03 has no file and must not pretend to have content")
	}
	if len(c.Chapters()) != 3 || len(c.Modules) != 1 {
		t.Errorf("got %d chapters, %d modules", len(c.Chapters()), len(c.Modules))
	}
}

// TestProblems checks that each kind of content error is reported at its file:line.
func TestProblems(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(fstest.MapFS)
		labs   func(string) bool
		want   string // "file:line: substring"
		wantAt string
	}{
		{
			name:   "missing manifest",
			edit:   func(m fstest.MapFS) { delete(m, "course.yaml") },
			wantAt: "course.yaml", want: "cannot read the manifest",
		},
		{
			name:   "manifest unknown field",
			edit:   func(m fstest.MapFS) { m["course.yaml"].Data = []byte("title: T\ncolour: red\nmodules: []\n") },
			wantAt: "course.yaml:2", want: "unknown field",
		},
		{
			name: "duplicate chapter id",
			edit: func(m fstest.MapFS) {
				m["course.yaml"].Data = []byte(strings.Replace(manifestYAML, "{id: ch03, title: 第三章}", "{id: ch02, title: 第三章}", 1))
			},
			wantAt: "course.yaml:8", want: `duplicate chapter id "ch02"`,
		},
		{
			name:   "chapter not in manifest",
			edit:   func(m fstest.MapFS) { m["chapters/ch09.md"] = &fstest.MapFile{Data: []byte(ch02)} },
			wantAt: "chapters/ch09.md:1", want: "not listed in course.yaml",
		},
		{
			name:   "front matter not opened",
			edit:   func(m fstest.MapFS) { m["chapters/ch02.md"].Data = []byte("## x\n") },
			wantAt: "chapters/ch02.md:1", want: "must start with a '---' line",
		},
		{
			name:   "front matter not closed",
			edit:   func(m fstest.MapFS) { m["chapters/ch02.md"].Data = []byte("---\nid: ch02\n") },
			wantAt: "chapters/ch02.md:1", want: "not closed",
		},
		{
			name: "bad front matter type",
			edit: func(m fstest.MapFS) {
				m["chapters/ch02.md"].Data = []byte(strings.Replace(ch02, "order: 2", "order: two", 1))
			},
			wantAt: "chapters/ch02.md:5", want: "",
		},
		{
			name: "front matter id mismatch",
			edit: func(m fstest.MapFS) {
				m["chapters/ch02.md"].Data = []byte(strings.Replace(ch02, "id: ch02", "id: ch22", 1))
			},
			wantAt: "chapters/ch02.md:2", want: `front matter id "ch22" does not match`,
		},
		{
			name: "title differs",
			edit: func(m fstest.MapFS) {
				m["chapters/ch02.md"].Data = []byte(strings.Replace(ch02, "title: 第二章", "title: 别的", 1))
			},
			wantAt: "chapters/ch02.md:3", want: "differs from course.yaml",
		},
		{
			name: "unknown lab",
			edit: func(m fstest.MapFS) {
				m["chapters/ch02.md"].Data = []byte(strings.Replace(ch02, "labs: []", "labs: [nic-rate-01]", 1))
			},
			wantAt: "chapters/ch02.md:6", want: `unknown lab id "nic-rate-01"`,
		},
		{
			name: "known lab passes, other unknown",
			edit: func(m fstest.MapFS) {
				m["chapters/ch02.md"].Data = []byte(strings.Replace(ch02, "labs: []", "labs: [good, bad]", 1))
			},
			labs:   func(id string) bool { return id == "good" },
			wantAt: "chapters/ch02.md:6", want: `unknown lab id "bad"`,
		},
		{
			name: "broken chapter link",
			edit: func(m fstest.MapFS) {
				m["chapters/ch02.md"].Data = []byte(ch02 + "\n见 [不存在](ch77.md)\n")
			},
			wantAt: "chapters/ch02.md:12", want: "unknown chapter",
		},
		{
			name: "link to unwritten chapter",
			edit: func(m fstest.MapFS) {
				m["chapters/ch02.md"].Data = []byte(ch02 + "\n见 [三](ch03.md)\n")
			},
			wantAt: "chapters/ch02.md:12", want: "not written yet",
		},
		{
			name: "broken anchor",
			edit: func(m fstest.MapFS) {
				m["chapters/ch01.md"].Data = []byte(strings.Replace(ch01, "ch02.md#带宽-busbw", "ch02.md#nope", 1))
			},
			wantAt: "chapters/ch01.md:11", want: "no heading with that anchor",
		},
		{
			name: "link to a server path that is no site page",
			edit: func(m fstest.MapFS) {
				m["chapters/ch02.md"].Data = []byte(ch02 + "\n见 [后台](/admin/exams)\n")
			},
			wantAt: "chapters/ch02.md:12", want: "points outside the course",
		},
		{
			name:   "missing asset",
			edit:   func(m fstest.MapFS) { delete(m, "assets/a.svg") },
			wantAt: "chapters/ch01.md:11", want: "missing asset",
		},
		{
			name: "H1 in body",
			edit: func(m fstest.MapFS) {
				m["chapters/ch02.md"].Data = []byte(ch02 + "\n# 大标题\n")
			},
			wantAt: "chapters/ch02.md:12", want: "use ## for sections",
		},
		{
			name:   "manifest without modules",
			edit:   func(m fstest.MapFS) { m["course.yaml"].Data = []byte("title: T\n") },
			wantAt: "course.yaml:1", want: "lists no modules",
		},
		{
			// A link to /etc/shadow would put the host's file into a page.
			name: "chapter is a symlink",
			edit: func(m fstest.MapFS) {
				m["chapters/ch02.md"] = &fstest.MapFile{Data: []byte("/etc/shadow"), Mode: fs.ModeSymlink}
			},
			wantAt: "chapters/ch02.md", want: "is a symbolic link",
		},
		{
			name:   "oversized chapter",
			edit:   func(m fstest.MapFS) { m["chapters/ch02.md"].Data = make([]byte, 5<<20) },
			wantAt: "chapters/ch02.md", want: "file too large: over 4 MiB",
		},
		{
			name:   "missing quiz file",
			edit:   func(m fstest.MapFS) { delete(m, "quizzes/ch01.yaml") },
			wantAt: "quizzes/ch01.yaml", want: "cannot read quiz",
		},
		{
			name: "quiz answer out of range",
			edit: func(m fstest.MapFS) {
				m["quizzes/ch01.yaml"].Data = []byte(strings.Replace(quizYAML, "answer: 1\n", "answer: 7\n", 1))
			},
			wantAt: "quizzes/ch01.yaml:3", want: "answer must be an option index",
		},
		{
			name: "quiz unknown type",
			edit: func(m fstest.MapFS) {
				m["quizzes/ch01.yaml"].Data = []byte(strings.Replace(quizYAML, "type: numeric", "type: essay", 1))
			},
			wantAt: "quizzes/ch01.yaml:15", want: `type must be single, multiple or numeric`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := goodFS()
			tt.edit(m)
			_, probs := Load(m, Options{LabExists: tt.labs})
			for _, p := range probs {
				s := p.String()
				if strings.HasPrefix(s, tt.wantAt+":") && strings.Contains(s, tt.want) {
					return
				}
			}
			t.Errorf("want a problem at %s containing %q, got:\n%v", tt.wantAt, tt.want, probs)
		})
	}
}

// Chapters link the server's exam and verification pages by path.
func TestSitePageLinks(t *testing.T) {
	m := goodFS()
	m["chapters/ch02.md"].Data = []byte(ch02 + "\n见 [认证考试](/exams)、[考试 m12](/exams/m12) 和 [证书验证](/verify)\n")
	c, probs := Load(m, Options{})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	ch, _ := c.Chapter("ch02")
	for _, want := range []string{`href="/exams"`, `href="/exams/m12"`, `href="/verify"`} {
		if !strings.Contains(string(ch.HTML), want) {
			t.Errorf("ch02 has no %s:\n%s", want, ch.HTML)
		}
	}
}

func TestQuizGrade(t *testing.T) {
	c, probs := Load(goodFS(), Options{})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	ch, _ := c.Chapter("ch01")
	q := ch.Quiz
	tests := []struct {
		name      string
		ans       Answers
		wantScore float64
		wantPass  bool
	}{
		{"all right", Answers{"q1": {"1"}, "q2": {"2", "0"}, "q3": {"176.5"}}, 1, true},
		{"numeric outside tolerance", Answers{"q1": {"1"}, "q2": {"0", "2"}, "q3": {"180"}}, 2.0 / 3, true},
		{"multiple needs all and only", Answers{"q1": {"1"}, "q2": {"0"}, "q3": {"175"}}, 2.0 / 3, true},
		{"multiple extra option", Answers{"q1": {"0"}, "q2": {"0", "1", "2"}, "q3": {"175"}}, 1.0 / 3, false},
		{"garbage", Answers{"q1": {"x"}, "q2": {"a"}, "q3": {"NaN"}}, 0, false},
		{"empty", Answers{}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := q.Grade(tt.ans)
			if diff := res.Score - tt.wantScore; diff > 1e-9 || diff < -1e-9 || res.Passed != tt.wantPass {
				t.Errorf("score %.3f passed %v, want %.3f %v", res.Score, res.Passed, tt.wantScore, tt.wantPass)
			}
			if len(res.Answers) != 3 || res.Answers[0].Explanation == "" {
				t.Errorf("want 3 graded answers with explanations, got %+v", res.Answers)
			}
		})
	}
}

func TestHeadingIDs(t *testing.T) {
	h := &headingIDs{seen: map[string]int{}}
	for _, tt := range []struct{ in, want string }{
		{"NCCL 架构", "nccl-架构"},
		{"NCCL 架构", "nccl-架构-1"},
		{"busbw = 2(n-1)/n", "busbw--2n-1n"},
		{"！？", "section"},
	} {
		if got := string(h.Generate([]byte(tt.in), 0)); got != tt.want {
			t.Errorf("Generate(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestEmbeddedCourseLoads(t *testing.T) {
	// Only the ids matter here; `commlab content check` validates the scenarios fully.
	cat, _ := scenarios.Load(scenarios.Embedded(), scenarios.CatalogDir, scenarios.Options{})
	c, probs := Load(Embedded(), Options{LabExists: func(id string) bool { _, ok := cat.Get(id); return ok }})
	if len(probs) > 0 {
		t.Fatalf("embedded course has problems:\n%v", probs)
	}
	if len(c.Modules) != 6 || len(c.Chapters()) != 30 {
		t.Fatalf("want 6 modules and 30 chapters, got %d and %d", len(c.Modules), len(c.Chapters()))
	}
}

// TestEmbeddedQuizzes answers every question of every written chapter with its key and
// with a wrong answer: the key scores, the wrong answer does not.
func TestEmbeddedQuizzes(t *testing.T) {
	cat, _ := scenarios.Load(scenarios.Embedded(), scenarios.CatalogDir, scenarios.Options{})
	c, probs := Load(Embedded(), Options{LabExists: func(id string) bool { _, ok := cat.Get(id); return ok }})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	for _, ch := range c.Chapters() {
		if ch.Quiz == nil {
			if ch.Written() {
				t.Errorf("%s has no quiz", ch.ID)
			}
			continue
		}
		for _, q := range ch.Quiz.Questions {
			right, wrong := keyAndWrong(q)
			if !q.correct(right) {
				t.Errorf("%s %s: its own key %v is graded wrong", ch.ID, q.ID, right)
			}
			if q.correct(wrong) {
				t.Errorf("%s %s: the wrong answer %v is graded right", ch.ID, q.ID, wrong)
			}
		}
	}
}

func keyAndWrong(q *Question) (right, wrong []string) {
	switch q.Type {
	case Single:
		return []string{strconv.Itoa(q.single)}, []string{strconv.Itoa((q.single + 1) % len(q.Options))}
	case Multiple:
		for i := range q.Options {
			if q.multiple[i] {
				right = append(right, strconv.Itoa(i))
			}
		}
		// Flip the first option: add it when missing, drop it when present.
		if q.multiple[0] {
			wrong = right[1:]
		} else {
			wrong = append([]string{"0"}, right...)
		}
		return right, wrong
	default:
		off := q.numeric * (q.tolerance + 0.05)
		if q.numeric == 0 {
			off = q.tolerance + 1
		}
		return []string{strconv.FormatFloat(q.numeric, 'g', -1, 64)}, []string{strconv.FormatFloat(q.numeric+off, 'g', -1, 64)}
	}
}
