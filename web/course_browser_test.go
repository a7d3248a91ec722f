package web_test

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/commlab/commlab/course"
	"github.com/commlab/commlab/internal/yamldecode"
)

// keyed is a quiz question with its answer.
type keyed struct {
	ID, Type string
	Answer   any
}

// quizKey reads a chapter's answer key from its quiz file (the course package keeps
// it unexported, so no page can show it).
func quizKey(t *testing.T, chapter string) []keyed {
	t.Helper()
	b, err := fs.ReadFile(course.Embedded(), "quizzes/"+chapter+".yaml")
	if err != nil {
		t.Fatal(err)
	}
	var q struct {
		Pass      float64
		Questions []struct {
			ID, Type                  string
			Answer                    any
			Prompt, Unit, Explanation string
			Options                   []string
			Tolerance                 float64
		}
	}
	if err := yamldecode.Decode(chapter+".yaml", b, 0, &q); err != nil {
		t.Fatal(err)
	}
	var out []keyed
	for _, qq := range q.Questions {
		out = append(out, keyed{qq.ID, qq.Type, qq.Answer})
	}
	return out
}

// answerAll fills the quiz on the page with the right answers.
func answerAll(key []keyed) []chromedp.Action[chromedp.Void] {
	var acts []chromedp.Action[chromedp.Void]
	for _, q := range key {
		name := "q." + q.ID
		switch q.Type {
		case "numeric":
			sel := fmt.Sprintf(`input[name=%q]`, name)
			acts = append(acts, chromedp.SetValue(sel, fmt.Sprint(q.Answer)))
		case "multiple":
			for _, a := range q.Answer.([]any) {
				acts = append(acts, chromedp.Click(fmt.Sprintf(`input[name=%q][value="%v"]`, name, a)))
			}
		default:
			acts = append(acts, chromedp.Click(fmt.Sprintf(`input[name=%q][value="%v"]`, name, q.Answer)))
		}
	}
	return acts
}

// TestBrowserQuizAndProgress walks a new learner through chapter 1's quiz (no
// verdict before an answer, wrong then right, a reload of the result, the answers
// shown again on reopening), the "read" control at the end of the chapter, the
// progress page with per-lab status, "continue" on the index, the register form
// while logged in, and the English UI.
func TestBrowserQuizAndProgress(t *testing.T) {
	t.Parallel() // no lab: beside the other browser tests without one
	hs, lib, st := courseServer(t)
	crs := lib.Course()
	ch1, _ := crs.Chapter("ch01")
	ch8, _ := crs.Chapter("ch08")
	key := quizKey(t, "ch01")

	ctx := browser(t, 150*time.Second)
	must := func(step string, err error) {
		t.Helper()
		if err != nil {
			screenshot(ctx, t, "failed-"+step)
			t.Fatalf("%s: %v", step, err)
		}
	}
	count := func(step, sel string) int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)))
		must(step, err)
		return n
	}
	verdicts := `section.quiz .explain, section.quiz .question.right, section.quiz .question.wrong, #quiz-score`

	// A visitor sees the questions and no verdict.
	must("visit ch01", chromedp.Do(ctx, chromedp.Navigate(hs.URL+"/course/ch01"), chromedp.WaitVisible(`section.quiz`)))
	if n := count("visitor verdicts", verdicts); n != 0 {
		t.Errorf("logged out: %d verdict elements on an unanswered quiz, want 0", n)
	}

	must("register", chromedp.Do(ctx,
		chromedp.Navigate(hs.URL+"/register"),
		chromedp.WaitVisible(`input[name=email]`),
		chromedp.SendKeys(`input[name=email]`, "quiz@example.com"),
		chromedp.SendKeys(`input[name=name]`, "学员乙"),
		chromedp.SendKeys(`input[name=password]`, "correct horse battery"),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`ol.modules`),
	))
	u, err := st.UserByEmail(context.Background(), "quiz@example.com")
	must("user", err)
	cont, err := chromedp.Run(ctx, chromedp.AttributeValue(`#continue`, "href"))
	must("begin link", err)
	if cont.Value != "/course/ch01" {
		t.Errorf("new learner's continue link = %q, want /course/ch01", cont.Value)
	}

	// Logged in, before any answer: still no verdict.
	must("open ch01", chromedp.Do(ctx, chromedp.Navigate(hs.URL+"/course/ch01"), chromedp.WaitVisible(`section.quiz button[type=submit]`)))
	if n := count("learner verdicts", verdicts); n != 0 {
		t.Errorf("logged in: %d verdict elements on an unanswered quiz, want 0", n)
	}

	// Wrong: the first question's answer shifted by one, the rest left blank.
	wrong := fmt.Sprintf(`input[name="q.%s"][value="%v"]`, key[0].ID, (key[0].Answer.(uint64)+1)%2)
	must("submit wrong", chromedp.Do(ctx,
		chromedp.Click(wrong),
		chromedp.Click(`section.quiz button[type=submit]`),
		chromedp.WaitVisible(`#quiz-score`),
	))
	loc, err := chromedp.Run(ctx, chromedp.Location())
	must("location", err)
	if !strings.HasSuffix(loc, "/course/ch01/quiz") {
		t.Errorf("after submitting at %s, want the result page /course/ch01/quiz", loc)
	}
	must("reload result", chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible(`#quiz-score`)))
	score, err := chromedp.Run(ctx, chromedp.Text(`#quiz-score`))
	must("score", err)
	screenshot(ctx, t, "quiz-1-wrong")
	if !strings.Contains(score, "0%") || count("wrong", `.question.wrong`) != len(key) || count("right", `.question.right`) != 0 {
		t.Errorf("wrong submission: score %q, %d wrong of %d", score, count("wrong", `.question.wrong`), len(key))
	}
	if n := count("kept choice", wrong+`:checked`); n != 1 {
		t.Errorf("the result page does not show the answer given (%d checked)", n)
	}
	if n := count("retry link", `.next-steps a[href="#quiz"]`); n != 1 {
		t.Errorf("failed result has %d retry links, want 1", n)
	}

	// Right, from the result page.
	must("submit right", chromedp.Do(ctx, append(answerAll(key),
		chromedp.Click(`section.quiz button[type=submit]`),
		chromedp.WaitVisible(`#quiz-score.pass`),
	)...))
	score, err = chromedp.Run(ctx, chromedp.Text(`#quiz-score`))
	must("score", err)
	screenshot(ctx, t, "quiz-2-right")
	if !strings.Contains(score, "100%") || count("right", `.question.right`) != len(key) {
		t.Errorf("right submission: score %q, %d right of %d", score, count("right", `.question.right`), len(key))
	}
	next, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('.next-steps a[data-next]')].map(a => a.getAttribute('href'))`))
	must("next steps", err)
	if want := []string{"/labs/" + ch1.Labs[0], "/course/" + ch1.Next.ID}; fmt.Sprint(next) != fmt.Sprint(want) {
		t.Errorf("next steps after passing = %v, want %v", next, want)
	}

	// Reopening the chapter shows the answers, their verdicts and the score.
	must("reopen", chromedp.Do(ctx, chromedp.Navigate(hs.URL+"/course/ch01"), chromedp.WaitVisible(`#quiz-score.pass`)))
	if n := count("reopen right", `.question.right`); n != len(key) {
		t.Errorf("reopened chapter shows %d right answers, want %d", n, len(key))
	}
	if n := count("reopen checked", `section.quiz input:checked`); n == 0 {
		t.Error("reopened chapter shows none of the answers given")
	}

	// "Mark as read" sits at the end and brings the learner back there.
	must("mark read", chromedp.Do(ctx,
		chromedp.Click(`#done form button`, chromedp.NodeVisible),
		chromedp.WaitVisible(`#done p.muted`),
	))
	y, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`window.scrollY`))
	must("scroll", err)
	if y < 1000 {
		t.Errorf("after marking read the page is at scrollY %v: it jumped to the top, want the end of the chapter", y)
	}

	// One of ch08's four labs passed: 1 of 4, not "labs passed".
	must("record lab", st.RecordLab(context.Background(), u.ID, "ch08", ch8.Labs[1], 0.9, true))
	must("progress", chromedp.Do(ctx, chromedp.Navigate(hs.URL+"/progress"), chromedp.WaitVisible(`table.progress`)))
	screenshot(ctx, t, "progress")
	passed, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('tr[data-chapter="ch08"] li[data-lab]')].map(li => li.dataset.lab + "=" + li.dataset.passed)`))
	must("lab status", err)
	want := []string{}
	for i, l := range ch8.Labs {
		want = append(want, fmt.Sprintf("%s=%v", l, i == 1))
	}
	if fmt.Sprint(passed) != fmt.Sprint(want) {
		t.Errorf("ch08 per-lab status = %v, want %v", passed, want)
	}
	studied, err := chromedp.Run(ctx, chromedp.Text(`tr[data-chapter="ch01"] td:nth-child(3)`))
	must("studied", err)
	if !strings.Contains(studied, "✓") {
		t.Errorf("ch01 studied cell = %q, want ✓", studied)
	}
	must("index", chromedp.Do(ctx, chromedp.Navigate(hs.URL+"/course"), chromedp.WaitVisible(`ol.modules`)))
	if n := count("labs done", `li[data-chapter="ch08"] .badge.lab`); n != 0 {
		t.Error("index marks ch08's labs done after one of four passed")
	}
	of, err := chromedp.Run(ctx, chromedp.Text(`li[data-chapter="ch08"] .badge.try`))
	must("labs of", err)
	if !strings.Contains(of, "1/4") {
		t.Errorf("ch08 lab badge = %q, want 1/4", of)
	}
	cont, err = chromedp.Run(ctx, chromedp.AttributeValue(`#continue`, "href"))
	must("continue link", err)
	if cont.Value != "/course/ch08" { // the lab was the last thing recorded and ch08 is not complete
		t.Errorf("continue link = %q, want /course/ch08", cont.Value)
	}

	// The learner's own pages fit a phone too.
	must("narrow", chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile)))
	for _, p := range []string{"/progress", "/course/ch01/quiz", "/course"} {
		must(p, chromedp.Do(ctx, chromedp.Navigate(hs.URL+p), chromedp.WaitVisible(chromedp.CSS("main"))))
		checkNarrow(ctx, t, p)
	}
	screenshot(ctx, t, "index-390px")
	must("wide", chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)))

	// The register and login forms send a logged-in learner on.
	for _, form := range []string{"/register", "/login"} {
		must("form "+form, chromedp.Do(ctx, chromedp.Navigate(hs.URL+form), chromedp.WaitVisible(`ol.modules`)))
	}

	// English: titles from the manifest, and a note that the text is Chinese.
	must("english", chromedp.Do(ctx, chromedp.Navigate(hs.URL+"/lang/en?next=/course"), chromedp.WaitVisible(`ol.modules`)))
	mod1, err := chromedp.Run(ctx, chromedp.Text(`#module-1 h2`))
	must("module title", err)
	note, err := chromedp.Run(ctx, chromedp.Text(`.hero .note`))
	must("note", err)
	screenshot(ctx, t, "index-en")
	if !strings.Contains(mod1, crs.Modules[0].TitleEN) || strings.ContainsAny(note, "，。：") || !strings.Contains(note, "Chinese") {
		t.Errorf("English index: module 1 %q, note %q", mod1, note)
	}
	must("english chapter", chromedp.Do(ctx, chromedp.Navigate(hs.URL+"/course/ch01"), chromedp.WaitVisible(`article .note`)))
}

// checkNarrow fails the test when the page in ctx, emulated 390 px wide, scrolls
// sideways, and names the element sticking out furthest.
func checkNarrow(ctx context.Context, t *testing.T, page string) {
	t.Helper()
	const widest = `(() => { let w = null, r = innerWidth; for (const e of document.querySelectorAll('body *')) { const x = e.getBoundingClientRect().right; if (x > r) { r = x; w = e; } } return w ? w.tagName + '.' + w.className + ' ends at ' + Math.round(r) : ''; })()`
	sw, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.scrollingElement.scrollWidth`))
	if err != nil {
		t.Fatalf("%s: %v", page, err)
	}
	iw, err := chromedp.Run(ctx, chromedp.Evaluate[int](`innerWidth`))
	if err != nil {
		t.Fatalf("%s: %v", page, err)
	}
	if iw != 390 || sw > iw {
		who, _ := chromedp.Run(ctx, chromedp.Evaluate[string](widest))
		t.Errorf("%s at 390 px: scrollWidth %d, innerWidth %d, want both 390 (widest: %s)", page, sw, iw, who)
		screenshot(ctx, t, "overflow-"+strings.NewReplacer("/", "-", "?", "-").Replace(strings.Trim(page, "/")))
	}
}

// TestBrowserChaptersAt390px: on a 390 px wide phone no written chapter, nor the
// index, scrolls sideways (wide tables and code blocks scroll inside themselves),
// and the contents fold under the title instead of filling the first screen.
func TestBrowserChaptersAt390px(t *testing.T) {
	t.Parallel() // no lab: beside the other browser tests without one
	hs, lib, _ := courseServer(t)
	ctx := browser(t, 10*time.Minute) // a bound against hangs; every written chapter is loaded
	must := func(step string, err error) {
		t.Helper()
		if err != nil {
			screenshot(ctx, t, "failed-"+step)
			t.Fatalf("%s: %v", step, err)
		}
	}
	must("viewport", chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile)))
	pages := []string{"/course"}
	for _, ch := range lib.Course().Chapters() {
		if ch.Written() {
			pages = append(pages, "/course/"+ch.ID)
		}
	}
	for _, p := range pages {
		must(p, chromedp.Do(ctx, chromedp.Navigate(hs.URL+p), chromedp.WaitVisible(chromedp.CSS("main"))))
		checkNarrow(ctx, t, p)
		if p == "/course" {
			continue
		}
		// Contents: the side column is hidden, the folded list sits under the title, closed.
		toc, err := chromedp.Run(ctx, chromedp.Evaluate[string](`getComputedStyle(document.querySelector('aside.toc')).display + ' ' + document.querySelector('details.toc-inline').open + ' ' + Math.round(document.querySelector('details.toc-inline').getBoundingClientRect().height)`))
		must(p+" toc", err)
		if f := strings.Fields(toc); f[0] != "none" || f[1] != "false" || len(f[2]) > 2 {
			t.Errorf("%s at 390 px: contents (side display, folded open, folded height) = %s; want none, false, one line", p, toc)
		}
	}
	must("ch01 narrow", chromedp.Do(ctx, chromedp.Navigate(hs.URL+"/course/ch01"), chromedp.WaitVisible(`article h1`)))
	screenshot(ctx, t, "chapter1-390px")
	must("ch01 wide", chromedp.Do(ctx, chromedp.EmulateViewport(1366, 900), chromedp.Navigate(hs.URL+"/course/ch01"), chromedp.WaitVisible(`article h1`)))
	screenshot(ctx, t, "chapter1-1366px")
	side, err := chromedp.Run(ctx, chromedp.Evaluate[string](`getComputedStyle(document.querySelector('aside.toc')).display + ' ' + getComputedStyle(document.querySelector('details.toc-inline')).display`))
	must("wide toc", err)
	if side != "block none" {
		t.Errorf("at 1366 px the contents (side, folded) display as %q, want the side column only", side)
	}
}
