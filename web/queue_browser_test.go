package web_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/scenarios"
)

// queuedHost is a fakeLabHost whose environments first wait in a batch queue:
// Up tells each state sent on queue, and comes up once it is closed.
type queuedHost struct {
	fakeLabHost
	queue chan session.Queue
}

func (h queuedHost) Up(ctx context.Context, env scenarios.Environment, ttl time.Duration, progress func(session.Progress)) (session.Env, error) {
	for q := range h.queue {
		progress(session.Progress{Note: "pending", Queue: &q})
	}
	return h.fakeLabHost.Up(ctx, env, ttl, progress)
}

// TestBrowserLabQueue: while a lab waits in the Slurm queue, its page shows
// the position and squeue's reason, explained, and follows them live (no
// reload), with the lab's clock standing still; once the lab has its nodes
// the line is gone and the terminals open.
func TestBrowserLabQueue(t *testing.T) {
	host := queuedHost{queue: make(chan session.Queue)}
	hs, _, _ := labServer(t, func(c *session.Config) { c.Provider, c.Faults = host, host })
	ctx := browser(t, 3*time.Minute)
	must(ctx, t, "register and start", chromedp.Do(ctx,
		chromedp.Navigate(hs.URL+"/register"),
		chromedp.SendKeys(`input[name=email]`, "queue@example.com", chromedp.NodeVisible),
		chromedp.SendKeys(`input[name=name]`, "排队的学员"),
		chromedp.SendKeys(`input[name=password]`, "correct horse battery"),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`ol.modules`),
		chromedp.Navigate(hs.URL+"/labs/ch01-tour"),
		chromedp.Click(`#start-lab`, chromedp.NodeVisible),
		chromedp.WaitVisible(`.lab-progress`),
	))
	_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(window.commlabMark = 1, true)`))
	must(ctx, t, "mark the page", err)
	for _, tt := range []struct {
		q    session.Queue
		want string
	}{
		{session.Queue{Position: 3, Reason: "Priority"}, "在队列中排第 3 位。原因：Priority（前面还有优先级更高的作业，它们先开始）"},
		{session.Queue{Position: 1, Reason: "Resources"}, "在队列中排第 1 位。原因：Resources（集群暂时没有足够的空闲节点，作业在等其他作业结束）"},
	} {
		host.queue <- tt.q
		qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := chromedp.Run(qctx, chromedp.Poll[bool](`window.commlabMark === 1 && !document.querySelector("#queue").hidden && `+
			fmt.Sprintf(`document.querySelector("#queue").textContent === %q && `, tt.want)+`document.querySelector("#progress-step").textContent === "在 Slurm 队列中等待计算节点"`))
		cancel()
		must(ctx, t, "queue line "+tt.want, err)
	}
	// The lab's clock stands still while it waits: its expiry moves on.
	expiry := chromedp.Evaluate[float64](`Date.parse(document.querySelector("[data-expires]").dataset.expires)`)
	before, err := chromedp.Run(ctx, expiry)
	must(ctx, t, "expiry", err)
	time.Sleep(1500 * time.Millisecond)
	after, err := chromedp.Run(ctx, expiry)
	must(ctx, t, "expiry", err)
	if after <= before {
		t.Errorf("the queued lab's expiry went from %v to %v: its clock runs", before, after)
	}
	screenshot(ctx, t, "lab-queued")
	close(host.queue)
	uctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	must(ctx, t, "terminals", chromedp.Do(uctx, chromedp.WaitVisible(`.term`)))
	gone, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!document.querySelector("#queue") || document.querySelector("#queue").hidden`))
	must(ctx, t, "queue line", err)
	if !gone {
		t.Error("the lab's page still shows the queue line with its terminals open")
	}
}
