package server

import (
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/web"
)

func TestQueueText(t *testing.T) {
	tests := []struct {
		q      session.Queue
		zh, en string
	}{
		{session.Queue{Position: 2, Reason: "Resources"}, "在队列中排第 2 位。原因：Resources（集群暂时没有足够的空闲节点", "Position 2 in the queue. Reason: Resources (not enough free nodes"},
		{session.Queue{Position: 1, Reason: "Priority"}, "原因：Priority（前面还有优先级更高的作业", "Reason: Priority (jobs of higher priority"},
		{session.Queue{Reason: "None"}, "正在排队。原因：None（调度器还没有评估", "Waiting in the queue. Reason: None (the scheduler has not looked"},
		{session.Queue{Reason: ""}, "原因：None（", "Reason: None ("},
		{session.Queue{Position: 3, Reason: "ReqNodeNotAvail, UnavailableNodes:node[3-4]"}, "原因：ReqNodeNotAvail（需要的节点暂时不可用", "Reason: ReqNodeNotAvail (the nodes it needs"},
		{session.Queue{Reason: "JobHeldAdmin"}, "原因：JobHeldAdmin（作业被暂挂", "Reason: JobHeldAdmin (the job is held"},
		{session.Queue{Reason: "QOSMaxJobsPerUserLimit"}, "原因：QOSMaxJobsPerUserLimit（已达到账户、QoS 或分区的使用上限", "Reason: QOSMaxJobsPerUserLimit (a limit of"},
		{session.Queue{Reason: "AssocGrpGRES"}, "（已达到账户", "(a limit of"},
		{session.Queue{Reason: "Reservation"}, "原因：Reservation（作业在等它的预留可用", "Reason: Reservation (the job waits for its reservation"},
		{session.Queue{Reason: "BadConstraints"}, "原因：BadConstraints（调度器给出的其他原因", "Reason: BadConstraints (another reason"},
	}
	for _, tt := range tests {
		t.Run(tt.q.Reason, func(t *testing.T) {
			for lang, want := range map[string]string{"zh": tt.zh, "en": tt.en} {
				if got := queueText(lang, &tt.q); !strings.Contains(got, want) || strings.Contains(got, "UnavailableNodes") {
					t.Errorf("%s: %q, want it to contain %q", lang, got, want)
				}
			}
		})
	}
	// Every explanation the table can pick is in the catalogue.
	for code, key := range queueReasons {
		if k := "lab.queue.why." + key; web.T("en", k) == k {
			t.Errorf("reason %s: %s is not in the catalogue", code, k)
		}
	}
	if queueText("zh", nil) != "" {
		t.Error("a lab not in a queue has a queue text")
	}
}

// TestLabPageShowsQueue: while a lab's environment waits in a batch queue, its
// state JSON and its page say where it stands and why, in the learner's
// language; once it has its nodes, neither does.
func TestLabPageShowsQueue(t *testing.T) {
	e := newLabEnv(t)
	e.host.gate = make(chan struct{})
	e.host.queue = &session.Queue{Position: 3, Reason: "Priority"}
	e.register(e.c, "queue@example.com")
	e.do(e.c, "GET", "/lang/en", nil)
	form := url.Values{"csrf_token": {e.csrf(e.c, "/labs/ch08-link-loss")}}
	code, body, h := e.do(e.c, "POST", "/labs/ch08-link-loss/start", form)
	if code != http.StatusSeeOther {
		t.Fatalf("start: %d\n%s", code, body)
	}
	path := h.Get("Location")
	state := func() stateView {
		var st stateView
		_, body, _ := e.do(e.c, "GET", path+"/state", nil)
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatalf("state: %v\n%s", err, body)
		}
		return st
	}
	var st stateView
	for deadline := time.Now().Add(10 * time.Second); st.Queue == nil; time.Sleep(10 * time.Millisecond) {
		if st = state(); time.Now().After(deadline) {
			t.Fatalf("the lab never showed its queue: %+v", st)
		}
	}
	want := "Position 3 in the queue. Reason: Priority (jobs of higher priority are ahead and start first)"
	if *st.Queue != *e.host.queue || st.QueueText != want || st.Step != session.StepQueued || st.StepText != "Waiting in the Slurm queue for compute nodes" {
		t.Errorf("state while queued: %+v", st)
	}
	_, page, _ := e.do(e.c, "GET", path, nil)
	if !strings.Contains(page, `<p id="queue" class="muted">`+html.EscapeString(want)+`</p>`) {
		t.Errorf("the lab page lacks the queue line %q", want)
	}
	// No terminal is open yet: the page must not say so.
	if !strings.Contains(page, `">The lab is starting:`) || strings.Contains(page, `">The terminals are open`) {
		t.Errorf("the scoring line of a queued lab:\n%s", page)
	}
	e.do(e.c, "GET", "/lang/zh", nil)
	if zh := state().QueueText; zh != "在队列中排第 3 位。原因：Priority（前面还有优先级更高的作业，它们先开始）" {
		t.Errorf("queue text in Chinese: %q", zh)
	}

	close(e.host.gate)
	for deadline := time.Now().Add(10 * time.Second); !st.Confirmed; time.Sleep(10 * time.Millisecond) {
		if st = state(); time.Now().After(deadline) {
			t.Fatalf("lab not confirmed: %+v", st)
		}
	}
	if st.Queue != nil || st.QueueText != "" {
		t.Errorf("a lab with its nodes still shows a queue: %+v", st)
	}
	if _, page, _ := e.do(e.c, "GET", path, nil); strings.Contains(page, `id="queue"`) {
		t.Error("the page of a confirmed lab has the queue line")
	}
}
