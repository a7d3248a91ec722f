package web_test

import (
	"context"
	"database/sql"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/commlab/commlab/cert"
	"github.com/commlab/commlab/exam"
	"github.com/commlab/commlab/scenarios/exams"
	"github.com/commlab/commlab/server"
	"github.com/commlab/commlab/server/store"
)

// seedDrawing finds an attempt seed whose tasks include the scenario, and the
// task's index.
func seedDrawing(t *testing.T, set *exam.Set, e *exam.Exam, scenario string) ([]byte, int) {
	t.Helper()
	for range 1000 {
		seed := exam.NewSeed()
		for _, tk := range set.Tasks(e, seed) {
			if tk.Scenario == scenario {
				return seed, tk.Index
			}
		}
	}
	t.Fatalf("no seed of 1000 draws %s", scenario)
	return nil, 0
}

// TestBrowserExamLiveLab: a candidate does one live lab task of an exam in
// Chromium: starts it from the attempt, types a real command, hands in the
// diagnosis citing it; the server grades it from the recording into the
// attempt, the lab ends with nothing left on the host, and the exam's result
// and the staff review show the score's evidence and the command.
//
// The attempt's seed is set by the test to one that draws ch07-wrong-interface,
// whose diagnosis this script takes from the scripted learner of TestLabs
// (labs/chapters); the draw itself is tested in server/. (A lab with a fix to
// re-measure would add a workload run whose busbw the shared CI distorts.)
func TestBrowserExamLiveLab(t *testing.T) {
	var set *exam.Set
	hs, mgr, sst := labServerWith(t, func(d *server.Deps) {
		var errs []error
		if set, errs = exam.Load(exams.Embedded(), ".", d.Scenarios, d.Library.Course()); len(errs) > 0 {
			t.Fatal(errs)
		}
		key, err := cert.LoadOrCreateKey(filepath.Join(t.TempDir(), "cert.key"))
		if err != nil {
			t.Fatal(err)
		}
		d.Exams, d.CertKey = set, key
	})
	st := sst.(*store.SQLite)
	m12, _ := set.Get("m12")
	ctx := browser(t, 6*time.Minute)
	acceptDialogs(ctx)
	must(ctx, t, "register and start", chromedp.Do(ctx,
		chromedp.Navigate(hs.URL+"/register"),
		chromedp.SendKeys(`input[name=email]`, "cand@example.com", chromedp.NodeVisible),
		chromedp.SendKeys(`input[name=name]`, "考生"),
		chromedp.SendKeys(`input[name=password]`, "correct horse battery"),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`ol.modules`),
		chromedp.Navigate(hs.URL+"/exams/m12"),
		chromedp.Click(`#exam-start`, chromedp.NodeVisible),
		chromedp.WaitVisible(`#exam-left`),
	))
	loc, err := chromedp.Run(ctx, chromedp.Location())
	must(ctx, t, "location", err)
	m := regexp.MustCompile(`/attempt/(\d+)$`).FindStringSubmatch(loc)
	if m == nil {
		t.Fatalf("after start at %s", loc)
	}
	aid, _ := strconv.ParseInt(m[1], 10, 64)
	seed, task := seedDrawing(t, set, m12, "ch07-wrong-interface")
	db, err := sql.Open("sqlite", st.Path()+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("UPDATE exam_attempts SET seed = ? WHERE id = ?", seed, aid); err != nil {
		t.Fatal(err)
	}
	before, _ := st.Attempt(context.Background(), aid)

	// Start the lab from the attempt page; the clock pauses while it starts.
	lctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	err = chromedp.Do(lctx,
		chromedp.Reload(),
		chromedp.Click(fmt.Sprintf(`[data-start-lab="%d"]`, task), chromedp.NodeVisible),
		chromedp.WaitVisible(`#back-to-exam`),
		chromedp.WaitVisible(`.term .xterm-rows`),
	)
	cancel()
	must(ctx, t, "start the exam lab", err)
	l, ok := mgr.Current(before.UserID)
	if !ok {
		t.Fatal("no lab for the candidate")
	}
	sandbox := labSandbox(l)
	screenshot(ctx, t, "exam-lab-1-terminals")
	page, err := chromedp.Run(ctx, chromedp.OuterHTML(`html`))
	must(ctx, t, "page html", err)
	for _, leak := range []string{l.Variant.Scenario.ID, l.Variant.Scenario.Title, "/hint/", `id="check-answer"`, "/giveup", "/course/ch07"} {
		if strings.Contains(page, leak) {
			t.Errorf("the exam lab page has %q", leak)
		}
	}
	for deadline := time.Now().Add(3 * time.Minute); !l.Status().Confirmed && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
	}
	// The server moves the deadline just after the lab is up.
	a, _ := st.Attempt(context.Background(), aid)
	for deadline := time.Now().Add(5 * time.Second); !a.Deadline.After(before.Deadline) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		a, _ = st.Attempt(context.Background(), aid)
	}
	if !a.Deadline.After(before.Deadline) {
		t.Errorf("the deadline did not move for the lab's start-up: %s, was %s", a.Deadline, before.Deadline)
	}
	t.Logf("the lab's start-up paused the clock for %s", a.Deadline.Sub(before.Deadline).Round(time.Millisecond))

	const evidence = "cat /etc/profile.d/nccl.sh"
	// A real command, cited as evidence; the right class and location.
	node := l.Variant.Values["node"]
	typeIn(ctx, t, node, evidence, "export NCCL_SOCKET_IFNAME=eth0")
	gctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	err = chromedp.Do(gctx,
		chromedp.Click(`#refresh-evidence`, chromedp.NodeVisible),
		chromedp.Click(fmt.Sprintf(`input[name=evidence][value="%s#1"]`, node), chromedp.NodeVisible),
		chromedp.SetValue(`select[name=class]`, "wrong-interface"),
		chromedp.SendKeys(`input[name=node]`, node),
		chromedp.Click(`#submit-answer`, chromedp.NodeVisible),
		chromedp.WaitVisible(fmt.Sprintf(`#task-%d [data-diagnosed="true"]`, task)),
	)
	cancel()
	must(ctx, t, "hand in the diagnosis", err)
	screenshot(ctx, t, "exam-lab-2-diagnosed")
	waitEnded(t, l)
	tasks, _ := st.Tasks(context.Background(), aid)
	if len(tasks) != 1 || tasks[0].Task != task || tasks[0].Score < 0.99 || !strings.Contains(tasks[0].Report, "evidence 0.25/0.25") {
		t.Errorf("the lab task as graded by the server: %+v", tasks)
	}
	if out, _ := exec.Command("ip", "netns", "list").Output(); sandbox == "" || strings.Contains(string(out), "cl-"+sandbox+"-") {
		t.Errorf("the graded exam lab's namespaces remain (sandbox %q):\n%s", sandbox, out)
	}

	// The exam's result shows what the lab's score rests on; the review, the command.
	must(ctx, t, "submit the exam", chromedp.Do(ctx,
		chromedp.Click(`#exam-submit`, chromedp.NodeVisible),
		chromedp.WaitVisible(`#exam-result`),
		chromedp.WaitVisible(fmt.Sprintf(`#task-%d .task-score`, task)),
	))
	screenshot(ctx, t, "exam-lab-3-result")
	score, err := chromedp.Run(ctx, chromedp.Text(fmt.Sprintf(`#task-%d .task-score`, task)))
	must(ctx, t, "task score", err)
	if !strings.Contains(score, "100%") || !strings.Contains(score, evidence) {
		t.Errorf("the lab task's result line: %q", score)
	}
	// The first account is the admin: here the candidate, who may review.
	must(ctx, t, "review", chromedp.Do(ctx,
		chromedp.Navigate(fmt.Sprintf("%s/admin/exams/attempt/%d", hs.URL, aid)),
		chromedp.WaitVisible(`table.commands`),
	))
	cmds, err := chromedp.Run(ctx, chromedp.Text(`table.commands`))
	must(ctx, t, "commands", err)
	if !strings.Contains(cmds, evidence) || !strings.Contains(cmds, node) {
		t.Errorf("the review's commands: %q", cmds)
	}
}
