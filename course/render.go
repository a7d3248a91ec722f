package course

import (
	"bytes"
	"fmt"
	"html/template"
	"io/fs"
	"net/url"
	"path"
	"strings"
	"sync"
	"unicode"

	chromahtml "github.com/alecthomas/chroma/v2/formatters/html"
	"github.com/yuin/goldmark"
	highlighting "github.com/yuin/goldmark-highlighting/v2"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
)

// HighlightStyle is the chroma style whose CSS the web UI ships (see HighlightCSS).
const HighlightStyle = "github"

// newMarkdown assembles the one goldmark pipeline used for chapters and quiz text:
// GFM (tables, strikethrough, autolinks, task lists), CJK line breaking, and code
// highlighting with CSS classes so pages stay small and the style lives in one file.
func newMarkdown() goldmark.Markdown {
	return goldmark.New(
		goldmark.WithExtensions(
			extension.GFM,
			extension.CJK,
			highlighting.NewHighlighting(
				highlighting.WithStyle(HighlightStyle),
				highlighting.WithFormatOptions(chromahtml.WithClasses(true)),
			),
		),
		goldmark.WithParserOptions(parser.WithAutoHeadingID()),
	)
}

// HighlightCSS returns the stylesheet for highlighted code blocks.
func HighlightCSS() (string, error) {
	var buf bytes.Buffer
	md := goldmark.New(goldmark.WithExtensions(highlighting.NewHighlighting(
		highlighting.WithStyle(HighlightStyle),
		highlighting.WithFormatOptions(chromahtml.WithClasses(true)),
		highlighting.WithCSSWriter(&buf),
	)))
	if err := md.Convert([]byte("```go\nx\n```\n"), &bytes.Buffer{}); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// renderer renders chapters and remembers every internal link so anchors can be checked
// once all chapters are rendered.
type renderer struct {
	md     goldmark.Markdown
	fsys   fs.FS
	course *Course
	links  []internalLink
}

type internalLink struct {
	file     string
	line     int
	chapter  string
	fragment string
}

func newRenderer(fsys fs.FS, c *Course) *renderer {
	return &renderer{md: newMarkdown(), fsys: fsys, course: c}
}

// render converts a chapter body; bodyLine is the file line on which body starts.
func (r *renderer) render(ch *Chapter, body []byte, bodyLine int, probs *Problems) (template.HTML, []Heading) {
	doc := r.parse(body)
	lineAt := func(n ast.Node) int { return bodyLine + nodeLine(n, body) - 1 }
	var toc []Heading
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Heading:
			idv, _ := n.AttributeString("id")
			id, _ := idv.([]byte)
			if n.Level == 1 {
				probs.add(ch.File, lineAt(n), "use ## for sections: the page prints the chapter title as the only H1")
			}
			if n.Level == 2 || n.Level == 3 {
				toc = append(toc, Heading{Level: n.Level, ID: string(id), Text: plainText(n, body)})
			}
		case *ast.Link:
			n.Destination = r.rewrite(ch, n.Destination, false, lineAt(n), probs)
			if isExternal(n.Destination) {
				n.SetAttributeString("rel", []byte("noopener"))
			}
		case *ast.Image:
			n.Destination = r.rewrite(ch, n.Destination, true, lineAt(n), probs)
		}
		return ast.WalkContinue, nil
	})
	var buf bytes.Buffer
	if err := r.md.Renderer().Render(&buf, body, doc); err != nil {
		probs.add(ch.File, bodyLine, "render: %v", err)
	}
	return template.HTML(buf.String()), toc
}

func (r *renderer) parse(src []byte) ast.Node {
	ctx := parser.NewContext(parser.WithIDs(&headingIDs{seen: map[string]int{}}))
	return r.md.Parser().Parse(text.NewReader(src), parser.WithContext(ctx))
}

// renderInline renders a short Markdown text (quiz prompts and explanations).
func (r *renderer) renderInline(src string) (template.HTML, error) {
	var buf bytes.Buffer
	if err := r.md.Convert([]byte(src), &buf); err != nil {
		return "", err
	}
	return template.HTML(buf.String()), nil
}

// rewrite maps repository-relative links to served URLs and reports broken ones.
// Chapters link to each other as "ch05.md#anchor" and to images as "../assets/x.svg",
// so the Markdown also reads correctly in a plain repository browser.
func (r *renderer) rewrite(ch *Chapter, dest []byte, image bool, line int, probs *Problems) []byte {
	d := string(dest)
	if d == "" || isExternal(dest) || strings.HasPrefix(d, "mailto:") {
		return dest
	}
	if strings.HasPrefix(d, "#") {
		r.links = append(r.links, internalLink{file: ch.File, line: line, chapter: ch.ID, fragment: d[1:]})
		return dest
	}
	if !image && sitePage(d) {
		return dest
	}
	u, err := url.Parse(d)
	if err != nil {
		probs.add(ch.File, line, "bad link %q: %v", d, err)
		return dest
	}
	target := path.Clean(path.Join(path.Dir(ch.File), u.Path))
	switch {
	case strings.HasPrefix(target, AssetDir+"/"):
		if _, err := fs.Stat(r.fsys, target); err != nil {
			probs.add(ch.File, line, "link to missing asset %q", d)
		}
		return []byte("/course/" + target)
	case !image && strings.HasPrefix(target, ChapterDir+"/") && strings.HasSuffix(target, ".md"):
		id := strings.TrimSuffix(path.Base(target), ".md")
		other, ok := r.course.byID[id]
		switch {
		case !ok:
			probs.add(ch.File, line, "link to unknown chapter %q", d)
		case !other.Written():
			probs.add(ch.File, line, "link to chapter %s, which is not written yet (name it in text instead)", id)
		default:
			r.links = append(r.links, internalLink{file: ch.File, line: line, chapter: id, fragment: u.Fragment})
		}
		out := "/course/" + id
		if u.Fragment != "" {
			out += "#" + u.Fragment
		}
		return []byte(out)
	default:
		probs.add(ch.File, line, "link %q points outside the course (use chNN.md for chapters, ../assets/ for images, a site page (%s), or a full https:// URL)", d, strings.Join(SitePages, ", "))
		return dest
	}
}

// checkAnchors reports internal links whose #fragment names no heading of the target.
func (r *renderer) checkAnchors(probs *Problems) {
	for _, l := range r.links {
		if l.fragment == "" {
			continue
		}
		ch := r.course.byID[l.chapter]
		found := false
		for _, h := range ch.TOC {
			if h.ID == l.fragment {
				found = true
				break
			}
		}
		if !found && !strings.Contains(string(ch.HTML), `id="`+l.fragment+`"`) {
			probs.add(l.file, l.line, "link to %s#%s: no heading with that anchor", l.chapter, l.fragment)
		}
	}
}

// SitePages are the server's own pages a chapter may link to by path, e.g.
// "[认证考试](/exams)": the exams and certificate verification.
var SitePages = []string{"/exams", "/verify"}

func sitePage(d string) bool {
	for _, p := range SitePages {
		if d == p || strings.HasPrefix(d, p+"/") {
			return true
		}
	}
	return false
}

func isExternal(dest []byte) bool {
	d := string(dest)
	return strings.HasPrefix(d, "https://") || strings.HasPrefix(d, "http://")
}

// nodeLine returns the 1-based line of a node within src, using the first text segment
// found in it or its descendants.
func nodeLine(n ast.Node, src []byte) int {
	off := -1
	if n.Type() == ast.TypeBlock && n.Lines().Len() > 0 {
		off = n.Lines().At(0).Start
	}
	if off < 0 {
		_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
			if t, ok := c.(*ast.Text); ok && entering {
				off = t.Segment.Start
				return ast.WalkStop, nil
			}
			return ast.WalkContinue, nil
		})
	}
	if off < 0 {
		return 1
	}
	return bytes.Count(src[:off], []byte("\n")) + 1
}

func plainText(n ast.Node, src []byte) string {
	var b strings.Builder
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch t := c.(type) {
		case *ast.Text:
			b.Write(t.Segment.Value(src))
		case *ast.String:
			b.Write(t.Value)
		}
		return ast.WalkContinue, nil
	})
	return b.String()
}

// headingIDs makes heading anchors that keep Chinese text (goldmark's default drops
// every non-ASCII letter, which would turn all Chinese headings into "heading-N").
type headingIDs struct{ seen map[string]int }

func (h *headingIDs) Generate(value []byte, _ ast.NodeKind) []byte {
	var b strings.Builder
	for _, r := range strings.TrimSpace(string(value)) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(unicode.ToLower(r))
		case r == ' ' || r == '-' || r == '_':
			b.WriteByte('-')
		}
	}
	id := b.String()
	if id == "" {
		id = "section"
	}
	n := h.seen[id]
	h.seen[id] = n + 1
	if n > 0 {
		id = fmt.Sprintf("%s-%d", id, n)
	}
	return []byte(id)
}

func (h *headingIDs) Put(value []byte) { h.seen[string(value)]++ }

var sharedMarkdown = sync.OnceValue(newMarkdown)

// Markdown renders a short Markdown text (a lab's task, hints and debrief) with the
// course's pipeline, so labs read like the chapters.
func Markdown(src string) (template.HTML, error) {
	var buf bytes.Buffer
	if err := sharedMarkdown().Convert([]byte(src), &buf); err != nil {
		return "", err
	}
	return template.HTML(buf.String()), nil
}
