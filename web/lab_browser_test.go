package web_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/commlab/commlab/course"
	"github.com/commlab/commlab/gpu"
	"github.com/commlab/commlab/injector"
	"github.com/commlab/commlab/labs/backend"
	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/labs/topology"
	"github.com/commlab/commlab/scenarios"
	"github.com/commlab/commlab/server"
	"github.com/commlab/commlab/server/store"

	"github.com/commlab/commlab/internal/testenv"
)

// labServer serves the embedded course with real labs (network namespaces, the
// injector, the bench workload), as `commlab serve` does as root.
func labServer(t testing.TB, opts ...func(*session.Config)) (*httptest.Server, *session.Manager, store.Store) {
	t.Helper()
	return labServerWith(t, nil, opts...)
}

// labServerWith is labServer with more of the server's collaborators (exams).
func labServerWith(t testing.TB, deps func(*server.Deps), opts ...func(*session.Config)) (*httptest.Server, *session.Manager, store.Store) {
	t.Helper()
	testenv.RequireRoot(t, "lab sandboxes")
	cat, probs := scenarios.Load(scenarios.Embedded(), scenarios.CatalogDir, scenarios.Options{
		Topology: func(name string) ([]string, []string, bool) {
			tp, err := topology.Builtin(name)
			if err != nil {
				return nil, nil, false
			}
			return tp.NodeNames(), nil, true
		},
	})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	lib, err := course.NewLibrary(course.Embedded(), course.Options{LabExists: func(id string) bool { _, ok := cat.Get(id); return ok }})
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	st, err := store.OpenSQLite(context.Background(), filepath.Join(data, "commlab.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	inj, err := backend.OpenInjector(injector.Options{DataDir: data, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	exe := testenv.Commlab(t)
	ctx, cancel := context.WithCancel(context.Background())
	cfg := session.Config{
		Provider: backend.Local{DataDir: data, Exe: exe, Log: log}, Faults: backend.Faults{In: inj},
		DataDir: data, TTL: 15 * time.Minute, Log: log,
	}
	for _, o := range opts {
		o(&cfg)
	}
	mgr := session.NewManager(ctx, cfg)
	t.Cleanup(func() {
		mgr.Shutdown()
		cancel()
		if left, _ := inj.List(); len(left) > 0 {
			t.Errorf("faults left in the journal: %+v", left)
		}
		if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), "cl-") {
			for _, l := range mgr.All() {
				if sb := labSandbox(l); sb != "" && strings.Contains(string(out), "cl-"+sb+"-") {
					t.Errorf("namespaces of a finished lab remain:\n%s", out)
				}
			}
		}
	})
	// Many accounts sign up from one address in the benchmark: no login rate limit here.
	d := server.Deps{Library: lib, Store: st, Secret: []byte("0123456789abcdef0123456789abcdef"), Scenarios: cat, Labs: mgr, Log: log}
	if deps != nil {
		deps(&d)
	}
	srv, err := server.New(server.Config{LoginRate: 1e6, LoginBurst: 1e6}, d)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return hs, mgr, st
}

func labSandbox(l *session.Lab) string { return l.Status().Sandbox }

// acceptDialogs confirms every confirm() the page opens (submit and stop ask first).
func acceptDialogs(ctx context.Context) {
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
}

// runLab starts chapter 1's lab from the chapter page and waits for the terminals.
func runLab(ctx context.Context, t *testing.T, base string, mgr *session.Manager, userID int64, shot string) *session.Lab {
	t.Helper()
	start := time.Now()
	must(ctx, t, "start lab", chromedp.Do(ctx,
		chromedp.Navigate(base+"/course/ch01"),
		chromedp.Click(`#labs a[href="/labs/ch01-tour"]`, chromedp.NodeVisible),
		chromedp.Click(`#start-lab`, chromedp.NodeVisible),
		chromedp.WaitVisible(`.lab-progress, .term`),
	))
	screenshot(ctx, t, shot+"-starting")
	lctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	must(ctx, t, "lab ready", chromedp.Do(lctx, chromedp.WaitVisible(`.term .xterm-rows`)))
	t.Logf("%s: terminals ready %s after the click on the chapter's lab link", shot, time.Since(start).Round(time.Millisecond))
	l, ok := mgr.Current(userID)
	if !ok {
		t.Fatal("no lab for the learner")
	}
	return l
}

// pressKeys types text into the focused element as a keyboard does: for each key one
// keyDown that carries the character (Chromium then fires keydown, keypress and input)
// and one keyUp. (chromedp.SendKeys sends a separate char event as well, which a real
// key press does not, and xterm.js then sees every character twice.)
func pressKeys(text string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		for _, r := range text {
			key, code, vk := string(r), "", int64(0)
			switch {
			case r == '\r':
				key, code, vk = "Enter", "Enter", 13
			case r >= 'a' && r <= 'z':
				code, vk = "Key"+strings.ToUpper(key), int64(r-'a'+'A')
			case r >= '0' && r <= '9':
				code, vk = "Digit"+key, int64(r)
			}
			ev := input.DispatchKeyEventParams{Type: input.DispatchKeyEventTypeKeyDown, Key: key, Code: code,
				Text: string(r), WindowsVirtualKeyCode: vk, NativeVirtualKeyCode: vk}
			if _, err := chromedp.Call(ctx, input.DispatchKeyEvent, ev); err != nil {
				return err
			}
			ev.Type, ev.Text = input.DispatchKeyEventTypeKeyUp, ""
			if _, err := chromedp.Call(ctx, input.DispatchKeyEvent, ev); err != nil {
				return err
			}
		}
		return nil
	})
}

// waitEnded waits for a graded lab's teardown (reverts and namespaces gone).
func waitEnded(t *testing.T, l *session.Lab) {
	t.Helper()
	start := time.Now()
	select {
	case <-l.Ended():
		t.Logf("lab %s: teardown took %s", l.ID, time.Since(start).Round(time.Millisecond))
	case <-time.After(2 * time.Minute):
		t.Fatalf("lab %s has not ended 2 min after grading (state %s)", l.ID, l.Status().State)
	}
}

func must(ctx context.Context, t *testing.T, step string, err error) {
	t.Helper()
	if err != nil {
		screenshot(ctx, t, "failed-"+strings.ReplaceAll(step, " ", "-"))
		t.Fatalf("%s: %v", step, err)
	}
}

// typeIn types a command into a node's terminal (through xterm.js's own input path,
// as keystrokes are) and waits until want appears on it.
func typeIn(ctx context.Context, t *testing.T, node, line, want string) {
	t.Helper()
	term := fmt.Sprintf(`[data-terminal=%q]`, node)
	// The page may be reloading (the start-up poll reloads it once the nodes exist):
	// wait for the terminal to be there and connected before typing.
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, err := chromedp.Run(rctx, chromedp.Poll[bool](fmt.Sprintf(`(() => { const el = document.querySelector('%s'); return !!(el && el.commlabTerm && el.commlabWS && el.commlabWS.readyState === 1) })()`, term)))
	cancel()
	must(ctx, t, "terminal "+node+" connected", err)
	// xterm.js pauses drawing a terminal scrolled out of view: bring it into view first.
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`(() => { const el = document.querySelector('%s'); el.scrollIntoView(); el.commlabTerm.input(%q, true); return true })()`, term, line+"\r")))
	must(ctx, t, "type "+line, err)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = chromedp.Run(wctx, chromedp.Poll[bool](fmt.Sprintf(`document.querySelector('%s .xterm-rows').textContent.includes(%q)`, term, want)))
	must(ctx, t, "see "+want, err)
}

func TestBrowserLab(t *testing.T) {
	hs, mgr, st := labServer(t)
	ctx := browser(t, 6*time.Minute)
	acceptDialogs(ctx)
	must(ctx, t, "register", chromedp.Do(ctx,
		chromedp.Navigate(hs.URL+"/register"),
		chromedp.SendKeys(`input[name=email]`, "lab@example.com", chromedp.NodeVisible),
		chromedp.SendKeys(`input[name=name]`, "实验学员"),
		chromedp.SendKeys(`input[name=password]`, "correct horse battery"),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`ol.modules`),
	))
	u, err := st.UserByEmail(context.Background(), "lab@example.com")
	if err != nil {
		t.Fatal(err)
	}

	// Run 1: the right diagnosis with evidence picked from the terminal.
	l := runLab(ctx, t, hs.URL, mgr, u.ID, "lab1")
	node, rate := l.Variant.Values["node"], l.Variant.Values["rate"]
	body, err := chromedp.Run(ctx, chromedp.OuterHTML(`html`))
	must(ctx, t, "page html", err)
	if strings.Contains(body, "rate "+rate+"Mbit") || strings.Contains(body, "注入器在") {
		t.Error("the lab page shows the answer before grading")
	}
	// Terminals open before the fault; the learner's evidence is read once it is in.
	for deadline := time.Now().Add(3 * time.Minute); !l.Status().Confirmed && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
	}
	typeIn(ctx, t, node, "tc -s qdisc show dev rdma0", "rate "+rate+"Mbit")
	screenshot(ctx, t, "lab1-terminal")

	// Reconnect: drop the websocket; the page reconnects to the same shell and the
	// earlier output is back on screen.
	term := fmt.Sprintf(`[data-terminal=%q]`, node)
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`(document.querySelector('%s').commlabWS.close(), true)`, term)))
	must(ctx, t, "drop websocket", err)
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	_, err = chromedp.Run(rctx, chromedp.Poll[bool](fmt.Sprintf(`(() => { const el = document.querySelector('%s'); return el.commlabWS.readyState === 1 && el.parentElement.querySelector('.term-status').classList.contains('ok') && el.querySelector('.xterm-rows').textContent.includes(%q) })()`, term, "rate "+rate+"Mbit")))
	cancel()
	must(ctx, t, "reconnect with scrollback", err)
	typeIn(ctx, t, node, "echo still-the-same-shell-$$", "still-the-same-shell-")

	// Real keystrokes: click the terminal and type through Chromium's input events, as a
	// learner does (typeIn above uses xterm.js's input API).
	must(ctx, t, "keyboard", chromedp.Do(ctx,
		chromedp.Click(term+" .xterm-screen", chromedp.NodeVisible),
		pressKeys("echo keys-$((6*7))\r"),
	))
	kctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, err = chromedp.Run(kctx, chromedp.Poll[bool](fmt.Sprintf(`document.querySelector('%s .xterm-rows').textContent.includes("keys-42")`, term)))
	cancel()
	must(ctx, t, "see keys-42", err)

	// The live chart goes on after the fault: a background run with the fault in place
	// reaches the page (the chart had only the healthy point and the mark before).
	before, _, stop := l.Samples().Subscribe()
	stop()
	var atFault int
	for _, x := range before {
		if x.Type == "event" {
			break
		}
		if x.Type == "sample" {
			atFault++
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	_, err = chromedp.Run(cctx, chromedp.Poll[bool](fmt.Sprintf(`Number(document.querySelector("#busbw-chart")?.dataset.samples || 0) > %d`, atFault)))
	cancel()
	must(ctx, t, "a chart point after the fault", err)

	must(ctx, t, "answer", chromedp.Do(ctx,
		chromedp.Click(`#refresh-evidence`, chromedp.NodeVisible),
		chromedp.Click(fmt.Sprintf(`input[name=evidence][value="%s#1"]`, node), chromedp.NodeVisible),
		chromedp.SetValue(`select[name=class]`, "nic-rate-limited"),
		chromedp.SendKeys(`input[name=node]`, node),
		chromedp.SendKeys(`input[name=nic]`, "rdma0"),
	))
	screenshot(ctx, t, "lab1-answer")

	// A hint opens in place: no reload, the half-filled answer stays.
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`(window.commlabMark = 1, true)`))
	must(ctx, t, "mark the page", err)
	must(ctx, t, "hint", chromedp.Do(ctx,
		chromedp.Click(`form[data-hint="1"] button`, chromedp.NodeVisible),
		chromedp.WaitVisible(`#hints .hint`),
	))
	kept, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`window.commlabMark === 1 && document.querySelector("select[name=class]").value === "nic-rate-limited" && document.querySelector("input[name=node]").value === %q && document.querySelectorAll("input[name=evidence]:checked").length === 1`, node)))
	must(ctx, t, "answer kept", err)
	if !kept {
		t.Error("opening a hint reloaded the page or cleared the answer")
	}

	// Check the answer: graded in place, the lab goes on.
	must(ctx, t, "check", chromedp.Do(ctx,
		chromedp.Click(`#check-answer`, chromedp.NodeVisible),
		chromedp.WaitVisible(`#check table.criteria`),
	))
	screenshot(ctx, t, "lab1-checked")
	if st := l.Status(); st.State != session.Ready || st.ChecksLeft != session.MaxChecks-1 {
		t.Errorf("after a check the lab is %s with %d checks left", st.State, st.ChecksLeft)
	}
	typeIn(ctx, t, node, "echo after-the-check", "after-the-check")

	must(ctx, t, "submit", chromedp.Do(ctx,
		chromedp.Click(`#submit-answer`, chromedp.NodeVisible),
		chromedp.WaitVisible(`#result`),
	))
	screenshot(ctx, t, "lab1-result")
	passed, err := chromedp.Run(ctx, chromedp.AttributeValue(`#result [data-passed]`, "data-passed"))
	must(ctx, t, "result", err)
	if passed.Value != "true" {
		html, _ := chromedp.Run(ctx, chromedp.InnerHTML(`#result`))
		t.Errorf("the right diagnosis did not pass:\n%s", html)
	}
	prog, err := st.Progress(context.Background(), u.ID)
	if err != nil || !prog["ch01"].LabPassed || prog["ch01"].LabAttempts != 1 {
		t.Errorf("progress after a passed lab: %+v %v", prog["ch01"], err)
	}
	waitEnded(t, l)

	// Run 2: the wrong node fails.
	l2 := runLab(ctx, t, hs.URL, mgr, u.ID, "lab2")
	if l2.ID == l.ID {
		t.Fatal("a second run reused the first lab")
	}
	wrong := map[string]string{"node1": "node2", "node2": "node1"}[l2.Variant.Values["node"]]
	must(ctx, t, "wrong answer", chromedp.Do(ctx,
		chromedp.SetValue(`select[name=class]`, "nic-rate-limited"),
		chromedp.SendKeys(`input[name=node]`, wrong),
		chromedp.SendKeys(`input[name=nic]`, "rdma0"),
		chromedp.Submit(`#answer`),
		chromedp.WaitVisible(`#result`),
	))
	screenshot(ctx, t, "lab2-result")
	if passed, _ := chromedp.Run(ctx, chromedp.AttributeValue(`#result [data-passed]`, "data-passed")); passed.Value != "false" {
		t.Errorf("the wrong node passed (data-passed=%q)", passed.Value)
	}
	// A wrong answer shows which criterion failed, not what was injected, until the
	// learner gives up.
	if html, _ := chromedp.Run(ctx, chromedp.OuterHTML(`main`)); strings.Contains(html, "lab-debrief") ||
		!strings.Contains(html, `data-criterion="location" class="bad"`) {
		t.Errorf("a wrong answer's page shows the debrief or no failed criterion")
	}
	must(ctx, t, "give up", chromedp.Do(ctx,
		chromedp.Click(`#give-up`, chromedp.NodeVisible),
		chromedp.WaitVisible(`#debrief`),
	))
	waitEnded(t, l2)
	if prog, _ := st.Progress(context.Background(), u.ID); prog["ch01"].LabAttempts != 2 || !prog["ch01"].LabPassed {
		t.Errorf("progress after a failed second attempt: %+v", prog["ch01"])
	}

	// Try again with the same variant; the intro page's banner names the running lab
	// and is gone after Stop.
	must(ctx, t, "again", chromedp.Do(ctx,
		chromedp.Click(`#again-same`, chromedp.NodeVisible),
		chromedp.WaitVisible(`.term .xterm-rows`),
	))
	l3, _ := mgr.Current(u.ID)
	if l3 == nil || l3.ID == l2.ID || l3.Variant.Seed != l2.Variant.Seed {
		t.Fatalf("try again (same variant) gave %+v", l3)
	}
	// 390 px wide: no horizontal scroll of the page; the terminal scrolls in itself.
	must(ctx, t, "mobile", chromedp.Do(ctx, chromedp.EmulateViewport(390, 844), chromedp.Sleep(300*time.Millisecond)))
	wide, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.scrollingElement.scrollWidth`))
	must(ctx, t, "page width", err)
	screenshot(ctx, t, "lab3-390px")
	if wide > 390 {
		t.Errorf("the lab page is %d px wide at 390 px", wide)
	}
	must(ctx, t, "desktop", chromedp.Do(ctx, chromedp.EmulateViewport(1366, 900)))
	must(ctx, t, "banner", chromedp.Do(ctx,
		chromedp.Navigate(hs.URL+"/labs/ch01-tour"),
		chromedp.WaitVisible(`#running-lab`),
	))
	if txt, _ := chromedp.Run(ctx, chromedp.Text(`#running-lab`)); !strings.Contains(txt, l3.Variant.Scenario.Title) {
		t.Errorf("the banner does not name the lab: %q", txt)
	}
	must(ctx, t, "stop", chromedp.Do(ctx,
		chromedp.Navigate(hs.URL+"/lab/"+l3.ID),
		chromedp.Click(`.lab-meta button`, chromedp.NodeVisible),
		chromedp.WaitVisible(`#start-lab`),
	))
	if n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#running-lab").length`)); n != 0 {
		t.Error("the banner stays after Stop")
	}
	waitEnded(t, l3)
}

// TestLabSecurity: another learner cannot open someone's lab or terminal, and posts
// without a CSRF token are refused.
func TestLabSecurity(t *testing.T) {
	hs, mgr, st := labServer(t)
	alice, bob := newSessionClient(t, hs.URL, "alice@example.com"), newSessionClient(t, hs.URL, "bob@example.com")
	ua, _ := st.UserByEmail(context.Background(), "alice@example.com")
	tok := csrfOf(t, alice, hs.URL+"/labs/ch01-tour")
	resp, err := alice.PostForm(hs.URL+"/labs/ch01-tour/start", url.Values{"csrf_token": {tok}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	l, ok := mgr.Current(ua.ID)
	if !ok {
		t.Fatalf("alice's lab did not start: %d", resp.StatusCode)
	}
	for _, path := range []string{"/lab/" + l.ID, "/lab/" + l.ID + "/state", "/lab/" + l.ID + "/commands", "/lab/" + l.ID + "/term/node1/ws", "/lab/" + l.ID + "/metrics/ws"} {
		resp, err := bob.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("bob GET %s: %d, want 404\n%.300s", path, resp.StatusCode, b)
		}
	}
	resp, err = alice.PostForm(hs.URL+"/lab/"+l.ID+"/submit", url.Values{"class": {"nic-rate-limited"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("submit without CSRF token: %d, want 403", resp.StatusCode)
	}
	// Nothing alice can fetch contains the answer before grading.
	for _, path := range []string{"/lab/" + l.ID, "/lab/" + l.ID + "/state"} {
		resp, err := alice.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, secret := range []string{"rate " + l.Variant.Values["rate"] + "Mbit", l.Variant.Debrief()[:30], "tc qdisc replace"} {
			if strings.Contains(string(b), secret) {
				t.Errorf("%s leaks %q", path, secret)
			}
		}
	}
	l.Stop()
	l.Wait()
}

var csrfRe = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)

// newSessionClient registers an account over plain HTTP and returns its client.
func newSessionClient(t testing.TB, base, email string) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	tok := csrfOf(t, c, base+"/register")
	resp, err := c.PostForm(base+"/register", url.Values{"csrf_token": {tok}, "email": {email}, "name": {email}, "password": {"correct horse battery"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("register %s: %d", email, resp.StatusCode)
	}
	return c
}

func csrfOf(t testing.TB, c *http.Client, page string) string {
	t.Helper()
	resp, err := c.Get(page)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := csrfRe.FindSubmatch(b)
	if m == nil {
		t.Fatalf("no CSRF token on %s", page)
	}
	return string(m[1])
}

// TestGPULabNeedsGPUNode: on a host without GPUs, a gpu lab's page says why it cannot
// run and offers no start button, and a start is refused with 503 and no lab.
func TestGPULabNeedsGPUNode(t *testing.T) {
	if _, err := gpu.Count(); err == nil {
		t.Skip("this host has GPUs")
	}
	hs, mgr, st := labServer(t)
	c := newSessionClient(t, hs.URL, "gpu@example.com")
	u, _ := st.UserByEmail(context.Background(), "gpu@example.com")
	page := hs.URL + "/labs/ch10-gpu-h2d-throttled"
	resp, err := c.Get(page)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "这台主机不能运行这个实验") || !strings.Contains(string(b), "GPU node") || strings.Contains(string(b), `id="start-lab"`) {
		t.Errorf("the gpu lab's page on a host without GPUs:\n%s", b)
	}
	tok := csrfOf(t, c, hs.URL+"/labs/ch01-tour")
	resp, err = c.PostForm(page+"/start", url.Values{"csrf_token": {tok}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("start a gpu lab without GPUs: %d, want 503", resp.StatusCode)
	}
	if _, ok := mgr.Current(u.ID); ok {
		t.Error("a gpu lab started on a host without GPUs")
	}
}

// TestLearnerShellNamesNoFault runs, for every fault kind the catalog uses in a
// namespace lab, one lab that injects it, and lists from the learner's shell what a
// curious learner would (processes with their arguments, environment, files, mounts,
// nftables, qdiscs, links): nothing may name the fault kind or the injector. (What the
// tools show of the fault itself, a tbf rate or a netem loss, is the evidence.)
func TestLearnerShellNamesNoFault(t *testing.T) {
	_, mgr, _ := labServer(t, func(c *session.Config) { c.NoStream = true })
	cat, _ := scenarios.Load(scenarios.Embedded(), scenarios.CatalogDir, scenarios.Options{})
	seen := map[string]bool{}
	for _, sc := range cat.All() {
		fresh := false
		for _, f := range sc.Faults {
			fresh = fresh || !seen[f.Kind]
			seen[f.Kind] = true
		}
		if !fresh || sc.Environment.Kind == "gpu" {
			continue
		}
		learner := int64(len(seen)) // one lab per learner at a time
		t.Run(sc.ID, func(t *testing.T) {
			// The labs measure nothing this test reads: they run side by side.
			t.Parallel()
			l, err := mgr.Start(learner, sc.Draw(1))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { l.Stop(); l.Wait() }()
			// Up: the faults are in and the shells open. The self-test that follows
			// only measures the workload; it adds nothing to the host.
			select {
			case <-l.Up():
			case <-l.Ended():
				t.Fatalf("lab: %+v", l.Status())
			case <-time.After(3 * time.Minute):
				t.Fatalf("lab not up after 3 minutes: %+v", l.Status())
			}
			terms := []string{"injector", "commlab f"}
			for _, f := range sc.Faults {
				if strings.Contains(f.Kind, "-") { // "loss", "delay": words the tools print anyway
					terms = append(terms, f.Kind)
				}
			}
			for _, node := range l.Status().Nodes {
				term, _ := l.Terminal(node)
				_, out, detach := term.Attach()
				_, _ = term.Write([]byte("ps -eo args; env; ls -la / /tmp /run /dev/shm ~; cat /proc/self/mountinfo; nft list ruleset; tc qdisc show; ip -d link show; echo AUDIT-$((40+2))-END\r"))
				var got strings.Builder
				timeout := time.After(time.Minute)
			read:
				for {
					select {
					case p, ok := <-out:
						if !ok {
							break read
						}
						got.Write(p)
						if strings.Contains(got.String(), "AUDIT-42-END") {
							break read
						}
					case <-timeout:
						t.Fatalf("%s: no end marker:\n%s", node, got.String())
					}
				}
				detach()
				s := got.String()
				for _, term := range terms {
					if i := strings.Index(s, term); i >= 0 {
						t.Errorf("%s: the learner can read %q: …%s…", node, term, s[max(0, i-200):min(len(s), i+200)])
					}
				}
			}
		})
	}
}
