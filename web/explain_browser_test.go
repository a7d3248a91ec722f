package web_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/commlab/commlab/course"
	"github.com/commlab/commlab/scenarios"
	"github.com/commlab/commlab/server"
	"github.com/commlab/commlab/server/store"
)

// A learner pastes a real failure excerpt, reads the verdict and follows
// the chapter link; then uploads a binary file and is told it is not text.
func TestBrowserExplain(t *testing.T) {
	t.Parallel() // no lab: beside the other browser tests without one
	cat, _ := scenarios.Load(scenarios.Embedded(), scenarios.CatalogDir, scenarios.Options{})
	lib, err := course.NewLibrary(course.Embedded(), course.Options{LabExists: func(id string) bool { _, ok := cat.Get(id); return ok }})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "commlab.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := server.New(server.Config{}, server.Deps{Library: lib, Store: st, Secret: []byte("0123456789abcdef0123456789abcdef"), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	bin := filepath.Join(t.TempDir(), "core.bin")
	if err := os.WriteFile(bin, append([]byte{0x7f, 'E', 'L', 'F'}, make([]byte, 4096)...), 0o644); err != nil {
		t.Fatal(err)
	}
	// From https://github.com/NVIDIA/nccl/issues/1405 (testdata/corpus).
	paste := "kp-ddp-worker-0:3468:3905 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer 10.216.210.236<54862> with status=12 opcode=0 len=0 vendor err 129 (Recv)\n" +
		"kp-ddp-worker-0:3468:3905 [4] NCCL INFO transport/net.cc:1302 -> 6\n"

	ctx := browser(t, 90*time.Second)
	must := func(step string, err error) {
		t.Helper()
		if err != nil {
			screenshot(ctx, t, "failed-explain-"+step)
			t.Fatalf("%s: %v", step, err)
		}
	}
	must("register", chromedp.Do(ctx,
		chromedp.Navigate(hs.URL+"/register"),
		chromedp.WaitVisible(`input[name=email]`),
		chromedp.SendKeys(`input[name=email]`, "explain@example.com"),
		chromedp.SendKeys(`input[name=name]`, "学员乙"),
		chromedp.SendKeys(`input[name=password]`, "correct horse battery"),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`ol.modules`),
		chromedp.Navigate(hs.URL+"/explain"),
		chromedp.WaitVisible(`textarea[name=log]`),
	))
	must("paste", chromedp.Do(ctx,
		chromedp.SetValue(`textarea[name=log]`, paste),
		chromedp.Click(`form.explain-form button`, chromedp.NodeVisible),
		chromedp.WaitVisible(`article.verdict`),
	))
	symptom, err := chromedp.Run(ctx, chromedp.AttributeValue(`article.verdict`, "data-symptom"))
	must("symptom", err)
	firstCause, err := chromedp.Run(ctx, chromedp.AttributeValue(`ol.causes li`, "data-cause"))
	must("cause", err)
	evidence, err := chromedp.Run(ctx, chromedp.Text(`table.evidence tbody`))
	must("evidence", err)
	screenshot(ctx, t, "explain-1-verdict")
	if symptom.Value != "ib-completion" || firstCause.Value != "network-fault" {
		t.Errorf("verdict %s / %s, want ib-completion / network-fault", symptom.Value, firstCause.Value)
	}
	if !strings.Contains(evidence, "IBV_WC_RETRY_EXC_ERR") || !strings.Contains(evidence, "NCCL 2.20+") {
		t.Errorf("evidence lacks the status name or the version range:\n%s", evidence)
	}
	must("chapter link", chromedp.Do(ctx,
		chromedp.Click(`ul.chapters a[href="/course/ch09"]`, chromedp.NodeVisible),
		chromedp.WaitVisible(`article.prose h1`),
	))
	location, err := chromedp.Run(ctx, chromedp.Location())
	must("location", err)
	if !strings.HasSuffix(location, "/course/ch09") {
		t.Errorf("chapter link went to %s", location)
	}
	must("upload", chromedp.Do(ctx,
		chromedp.Navigate(hs.URL+"/explain"),
		chromedp.WaitVisible(`input[name=file]`),
		chromedp.SetUploadFiles(`input[name=file]`, []string{bin}),
		chromedp.Click(`form.explain-form button`, chromedp.NodeVisible),
		chromedp.WaitVisible(`article.verdict`),
	))
	page, err := chromedp.Run(ctx, chromedp.Text(`article.verdict`))
	must("binary verdict", err)
	screenshot(ctx, t, "explain-2-binary")
	if !strings.Contains(page, "binary data") {
		t.Errorf("binary upload: verdict does not say so:\n%s", page)
	}
}
