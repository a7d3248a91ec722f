package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/commlab/commlab/injector"
	"github.com/commlab/commlab/labs/backend"
	"github.com/commlab/commlab/labs/netns"
	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/server/store"
)

// TestBrowserWorkshop runs a workshop on real labs: the instructor creates it in
// Chromium, three learners join (one in a second Chromium, two over HTTP) and start
// the lab the instructor opens, the dashboard shows them live, an extra fault goes
// into one learner's lab and that learner's terminal shows it (and the instructor's
// read-only view of it), a message and a revealed hint reach the lab page live, an
// extension moves every lab's end (sandbox and fault deadlines first), one
// learner's lab is reset and started again, and ending the workshop reverts every
// lab, leaving nothing on the host.
func TestBrowserWorkshop(t *testing.T) {
	var data string
	hs, mgr, st := labServer(t, func(c *session.Config) { c.NoStream, data = true, c.DataDir })
	ictx := browser(t, 8*time.Minute)
	acceptDialogs(ictx)
	lctx := browser(t, 8*time.Minute)
	acceptDialogs(lctx)
	bg := context.Background()

	register := func(ctx context.Context, email string) int64 {
		must(ctx, t, "register "+email, chromedp.Do(ctx,
			chromedp.Navigate(hs.URL+"/register"),
			chromedp.SendKeys(`input[name=email]`, email, chromedp.NodeVisible),
			chromedp.SendKeys(`input[name=name]`, strings.Split(email, "@")[0]),
			chromedp.SendKeys(`input[name=password]`, "correct horse battery"),
			chromedp.Submit(`input[name=password]`),
			chromedp.WaitVisible(`ol.modules`),
		))
		u, err := st.UserByEmail(bg, email)
		if err != nil {
			t.Fatal(err)
		}
		return u.ID
	}
	inst := register(ictx, "teacher@example.com")
	if err := st.SetRole(bg, inst, store.RoleInstructor); err != nil {
		t.Fatal(err)
	}
	must(ictx, t, "create", chromedp.Do(ictx,
		chromedp.Navigate(hs.URL+"/workshops"),
		chromedp.SendKeys(`#create-workshop input[name=title]`, "NCCL workshop", chromedp.NodeVisible),
		chromedp.SendKeys(`#create-workshop textarea[name=labs]`, "ch01-tour"),
		chromedp.Submit(`#create-workshop input[name=title]`),
		chromedp.WaitVisible(`#dashboard`),
	))
	code, err := chromedp.Run(ictx, chromedp.Text(`.join-code`))
	must(ictx, t, "join code", err)
	wsPath, err := chromedp.Run(ictx, chromedp.Evaluate[string](`location.pathname`))
	must(ictx, t, "workshop path", err)

	// Learner A in Chromium; B and C over HTTP.
	a := register(lctx, "alice@example.com")
	must(lctx, t, "join", chromedp.Do(lctx,
		chromedp.Navigate(hs.URL+"/workshops"),
		chromedp.SendKeys(`#join-workshop input[name=code]`, strings.ToLower(code), chromedp.NodeVisible),
		chromedp.Submit(`#join-workshop input[name=code]`),
		chromedp.WaitVisible(`ol.ws-labs`),
	))
	var others []*http.Client
	for _, email := range []string{"bob@example.com", "carol@example.com"} {
		c := newSessionClient(t, hs.URL, email)
		postForm(t, c, hs.URL+"/workshops", hs.URL+"/workshops/join", url.Values{"code": {code}})
		others = append(others, c)
	}
	poll(ictx, t, "three learners on the dashboard", `document.querySelectorAll('#dashboard tbody tr[data-learner]').length === 3`)
	screenshot(ictx, t, "workshop-joined")

	// Lab 1 opens; the learner's page offers it without a reload.
	must(ictx, t, "open lab 1", chromedp.Do(ictx, chromedp.Click(`#open-lab`, chromedp.NodeVisible)))
	must(lctx, t, "start lab", chromedp.Do(lctx,
		chromedp.Click(`button[data-start="1"]`, chromedp.NodeVisible),
		chromedp.WaitVisible(`.term .xterm-rows`),
	))
	for _, c := range others {
		postForm(t, c, hs.URL+wsPath, hs.URL+wsPath+"/labs/1/start", url.Values{})
	}
	l, ok := mgr.Current(a)
	if !ok {
		t.Fatal("no lab for learner A")
	}
	for deadline := time.Now().Add(3 * time.Minute); !l.Status().Confirmed && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
	}
	poll(ictx, t, "three labs live", `document.querySelectorAll('#dashboard td[data-state=working], #dashboard td[data-state=starting]').length === 3`)
	screenshot(ictx, t, "workshop-working")

	// The extra fault: the same kind, on the node the scenario left healthy.
	other := "node1"
	if l.Variant.Values["node"] == other {
		other = "node2"
	}
	// The link itself is shaped to its rated speed; the fault's own rate is what shows.
	check := fmt.Sprintf(`echo rate-check-$(tc qdisc show dev rdma0 | grep -c "rate %sMbit")`, l.Variant.Values["rate"])
	typeIn(lctx, t, other, check, "rate-check-0")
	must(ictx, t, "inject", chromedp.Do(ictx,
		chromedp.SetValue(`#inject-learner`, fmt.Sprint(a)),
		chromedp.SetValue(`#inject-form select[name=kind]`, "nic-rate"),
		chromedp.SendKeys(`#inject-form input[name=node]`, other),
		chromedp.Click(`#inject-fault`),
	))
	poll(ictx, t, "fault in the instructor's timeline", `document.querySelector('#timeline').textContent.includes('nic-rate')`)
	typeIn(lctx, t, other, check, "rate-check-1")
	screenshot(lctx, t, "workshop-learner-fault")
	// The answer's class list (the taxonomy, the same for every lab) and the terminals
	// (what the learner found) aside, the page must not name the kind.
	labHTML, err := chromedp.Run(lctx, chromedp.Evaluate[string](`(() => { const d = document.documentElement.cloneNode(true);
		d.querySelectorAll('select[name=class], .term').forEach((e) => e.remove()); return d.outerHTML })()`))
	must(lctx, t, "lab html", err)
	if strings.Contains(labHTML, "nic-rate") {
		t.Error("the learner's lab page names the injected kind")
	}

	// The instructor watches the learner's terminal, read-only and live.
	must(ictx, t, "watch", chromedp.Do(ictx,
		chromedp.Navigate(fmt.Sprintf("%s%s/learners/%d", hs.URL, wsPath, a)),
		chromedp.WaitVisible(`.term .xterm-rows`),
	))
	poll(ictx, t, "watched output", fmt.Sprintf(`document.querySelector('[data-terminal=%q] .xterm-rows').textContent.includes('rate-check-1')`, other))
	screenshot(ictx, t, "workshop-watch")

	// The message and a hint revealed to all reach the learner's lab page live; the
	// hint opens in place and costs nothing.
	must(ictx, t, "message", chromedp.Do(ictx,
		chromedp.Navigate(hs.URL+wsPath),
		chromedp.SendKeys(`input[name=text]`, "ten minutes left", chromedp.NodeVisible),
		chromedp.Click(`#send-message`),
	))
	poll(lctx, t, "message on the lab page", `document.querySelector('#ws-news').textContent.includes('ten minutes left')`)
	must(ictx, t, "reveal hint", chromedp.Do(ictx,
		chromedp.SetValue(`#hint-form select[name=lab]`, "1"),
		chromedp.SetValue(`#hint-form select[name=n]`, "1"),
		chromedp.Click(`#reveal-hint`),
	))
	poll(lctx, t, "hint open on the lab page", `document.querySelector('form[data-hint="1"]') === null && document.querySelector('#hints .hint') !== null`)
	if used, open := l.HintsUsed(), l.HintsOpen(); len(used) != 0 || len(open) != 1 {
		t.Errorf("after the reveal: paid hints %v, open %v", used, open)
	}
	screenshot(lctx, t, "workshop-lab-news")

	// Extending every lab moves the lab page's countdown, and what ends the lab from
	// outside moved first: the sandbox's state file and the faults' journaled deadlines.
	oldEnd := l.Status().Expires
	must(ictx, t, "extend", chromedp.Do(ictx,
		chromedp.SetValue(`#extend-form input[name=minutes]`, "20"),
		chromedp.Click(`#extend-labs`),
	))
	poll(lctx, t, "countdown moved", fmt.Sprintf(`Date.parse(document.querySelector('.ttl').dataset.expires) >= %d`, oldEnd.Add(20*time.Minute).UnixMilli()))
	newEnd := l.Status().Expires
	if sb, err := netns.ReadState(data, labSandbox(l)); err != nil || sb.Expires.Before(newEnd.Add(-time.Second)) {
		t.Errorf("sandbox state after the extension: %v, expires %v, want %s", err, sb, newEnd)
	}
	inj, err := backend.OpenInjector(injector.Options{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	faults, err := inj.List()
	if err != nil {
		t.Fatal(err)
	}
	var mine int // the lab's own fault and the instructor's extra one
	for _, f := range faults {
		if !strings.HasPrefix(f.Target.String(), labSandbox(l)+"/") {
			continue
		}
		mine++
		if f.Deadline.Before(oldEnd.Add(19 * time.Minute)) {
			t.Errorf("fault %s (%s) still ends at %s after the extension", f.ID, f.Kind, f.Deadline)
		}
	}
	if mine != 2 {
		t.Errorf("%d faults journaled on the lab's sandbox, want 2:\n%+v", mine, faults)
	}
	must(lctx, t, "learner timeline", chromedp.Do(lctx, chromedp.Navigate(hs.URL+wsPath), chromedp.WaitVisible(`#timeline`)))
	poll(lctx, t, "message reaches the learner", `document.querySelector('#timeline').textContent.includes('ten minutes left')`)
	timeline, err := chromedp.Run(lctx, chromedp.Text(`#timeline`))
	must(lctx, t, "timeline text", err)
	if strings.Contains(timeline, "nic-rate") || strings.Contains(timeline, "tc ") || !strings.Contains(timeline, "讲师调整了你的实验环境") {
		t.Errorf("learner's timeline: %q", timeline)
	}

	// Resetting one learner's lab ends it cleanly (namespaces gone); they start again.
	bob, err := st.UserByEmail(bg, "bob@example.com")
	if err != nil {
		t.Fatal(err)
	}
	lb, ok := mgr.Current(bob.ID)
	if !ok {
		t.Fatal("no lab for bob")
	}
	sbB := labSandbox(lb)
	must(ictx, t, "reset bob", chromedp.Do(ictx, chromedp.Click(fmt.Sprintf(`button[data-reset="%d"]`, bob.ID), chromedp.NodeVisible)))
	waitEnded(t, lb)
	if out, _ := exec.Command("ip", "netns", "list").Output(); sbB == "" || strings.Contains(string(out), "cl-"+sbB+"-") {
		t.Errorf("bob's sandbox %q after the reset:\n%s", sbB, out)
	}
	poll(ictx, t, "bob's lab not started", fmt.Sprintf(`document.querySelector('#dashboard tr[data-learner="%d"] td[data-state]').dataset.state === 'notstarted'`, bob.ID))
	postForm(t, others[0], hs.URL+wsPath, hs.URL+wsPath+"/labs/1/start", url.Values{})

	// At 390 px the dashboard scrolls inside its box; the page itself does not.
	must(ictx, t, "narrow", chromedp.Do(ictx, chromedp.EmulateViewport(390, 844), chromedp.WaitVisible(`#dashboard tbody tr[data-learner]`)))
	fits, err := chromedp.Run(ictx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth <= 390`))
	must(ictx, t, "width", err)
	if !fits {
		t.Error("the dashboard page is wider than 390 px")
	}
	screenshot(ictx, t, "workshop-390")

	var labs []*session.Lab
	sandboxes := map[*session.Lab]string{} // gone from Status once the lab is down
	for _, lab := range mgr.All() {
		if lab.Running() {
			labs = append(labs, lab)
			sandboxes[lab] = labSandbox(lab)
		}
	}
	if len(labs) != 3 {
		t.Fatalf("%d labs run, want 3", len(labs))
	}
	must(ictx, t, "end", chromedp.Do(ictx, chromedp.Click(`#end-workshop`, chromedp.NodeVisible)))
	poll(lctx, t, "the learner sees the end", `document.querySelector('.workshop').dataset.ended === 'true'`)
	for _, lab := range labs {
		waitEnded(t, lab)
		sb := sandboxes[lab]
		if out, _ := exec.Command("ip", "netns", "list").Output(); sb != "" && strings.Contains(string(out), "cl-"+sb+"-") {
			t.Errorf("namespaces of lab %s remain after the end:\n%s", lab.ID, out)
		}
	}
}

func poll(ctx context.Context, t *testing.T, what, js string) {
	t.Helper()
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err := chromedp.Run(pctx, chromedp.Poll[bool](js))
	must(ctx, t, what, err)
}

// postForm posts a form with the CSRF token of page and expects a redirect.
func postForm(t *testing.T, c *http.Client, page, target string, form url.Values) {
	t.Helper()
	form.Set("csrf_token", csrfOf(t, c, page))
	resp, err := c.PostForm(target, form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d", target, resp.StatusCode)
	}
}
