package web_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/commlab/commlab/course"
	"github.com/commlab/commlab/scenarios"
	"github.com/commlab/commlab/server"
	"github.com/commlab/commlab/server/store"
)

// The package's one headless Chromium (Debian's package), started by the first
// browser test and closed by TestMain: a start costs seconds on a busy host.
var chromium struct {
	once sync.Once
	ctx  context.Context // the browser's first tab, never used for pages
	stop func()
	err  error
}

// browser gives one test a tab of its own in the package's Chromium, in a browser
// context of its own (cookies and storage as in a fresh browser), closed when the
// test ends or timeout passes.
func browser(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip("browser test (headless Chromium): skipped under -short")
	}
	chromium.once.Do(startChromium)
	if chromium.err != nil {
		t.Fatal(chromium.err)
	}
	ctx, cancel := chromedp.NewContext(chromium.ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	ctx, cancel2 := context.WithTimeout(ctx, timeout)
	t.Cleanup(cancel2)
	return ctx
}

func startChromium() {
	path, err := exec.LookPath("chromium")
	if err != nil {
		chromium.err = fmt.Errorf("chromium not installed (make test installs it): %w", err)
		return
	}
	dir, err := os.MkdirTemp("", "commlab-chromium-")
	if err != nil {
		chromium.err = err
		return
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // CI runs as root
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(dir),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel2 := chromedp.NewContext(actx)
	chromium.ctx = ctx
	chromium.stop = func() {
		cancel2()
		cancel()
		os.RemoveAll(dir)
	}
	if err := chromedp.Do(ctx); err != nil {
		chromium.err = fmt.Errorf("start chromium: %w", err)
	}
}

// closeChromium ends the package's Chromium, if a test started it.
func closeChromium() {
	if chromium.stop != nil {
		chromium.stop()
	}
}

// screenshot saves the page under artifacts/ (ignored by git) for review.
func screenshot(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	// A screenshot is for review only: it must not spend the test's time budget.
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	dir := filepath.Join("..", "artifacts", "browser")
	_ = os.MkdirAll(dir, 0o755)
	_ = os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
}

// courseServer serves the embedded course and catalogue on a fresh SQLite store,
// without labs (the lab tests start real ones).
func courseServer(t *testing.T) (*httptest.Server, *course.Library, store.Store) {
	t.Helper()
	cat, _ := scenarios.Load(scenarios.Embedded(), scenarios.CatalogDir, scenarios.Options{})
	lib, err := course.NewLibrary(course.Embedded(), course.Options{LabExists: func(id string) bool { _, ok := cat.Get(id); return ok }})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "commlab.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv, err := server.New(server.Config{}, server.Deps{Library: lib, Store: st, Scenarios: cat, Secret: []byte("0123456789abcdef0123456789abcdef"), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return hs, lib, st
}

func TestBrowserReadChapterOne(t *testing.T) {
	t.Parallel() // no lab: beside the other browser tests without one
	hs, lib, _ := courseServer(t)
	ch1, _ := lib.Course().Chapter("ch01")

	ctx := browser(t, 90*time.Second)
	must := func(step string, err error) {
		t.Helper()
		if err != nil {
			screenshot(ctx, t, "failed-"+step)
			t.Fatalf("%s: %v", step, err)
		}
	}
	must("register", chromedp.Do(ctx,
		chromedp.Navigate(hs.URL+"/register"),
		chromedp.WaitVisible(`input[name=email]`),
		chromedp.SendKeys(`input[name=email]`, "learner@example.com"),
		chromedp.SendKeys(`input[name=name]`, "学员甲"),
		chromedp.SendKeys(`input[name=password]`, "correct horse battery"),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`ol.modules`),
	))
	location, err := chromedp.Run(ctx, chromedp.Location())
	must("location", err)
	if !strings.HasSuffix(location, "/course") {
		t.Fatalf("after register at %s, want /course", location)
	}
	screenshot(ctx, t, "1-index")

	must("open chapter 1", chromedp.Do(ctx,
		chromedp.Click(`a[href="/course/ch01"]`, chromedp.NodeVisible),
		chromedp.WaitVisible(`article.prose h1`),
	))
	h1, err := chromedp.Run(ctx, chromedp.Text(`article.prose h1`))
	must("h1", err)
	tableText, err := chromedp.Run(ctx, chromedp.Text(`article.prose table`, chromedp.NodeVisible))
	must("table", err)
	tokens, err := chromedp.Run(ctx, chromedp.Evaluate[int](`[...document.querySelectorAll('article.prose pre.chroma span[class]')].filter(s => !['line','cl'].includes(s.className)).length`))
	must("code block", err)
	screenshot(ctx, t, "2-chapter1")
	if h1 != ch1.Title {
		t.Errorf("h1 = %q, want %q", h1, ch1.Title)
	}
	if strings.TrimSpace(tableText) == "" {
		t.Error("chapter 1 table is empty")
	}
	if tokens == 0 {
		t.Error("no code block of chapter 1 is highlighted (no token spans in pre.chroma)")
	}

	must("mark read", chromedp.Do(ctx,
		chromedp.Click(`form[action="/course/ch01/read"] button`, chromedp.NodeVisible),
		chromedp.WaitVisible(`section.done p.badge.read`),
		chromedp.Navigate(hs.URL+"/course"),
		chromedp.WaitVisible(`ol.modules`),
	))
	readBadges, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('li[data-chapter="ch01"] .badge.read').length`))
	must("count marks", err)
	screenshot(ctx, t, "3-index-read")
	if readBadges != 1 {
		t.Errorf("index shows %d read marks on ch01, want 1", readBadges)
	}
}
