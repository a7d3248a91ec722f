package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/server/store"
)

// newExamLabEnv serves the shipped exams with labs on a real session manager
// whose host is the fake of the lab page tests (no root).
func newExamLabEnv(t *testing.T) (*examEnv, *labEnv) {
	t.Helper()
	return newExamLabEnvAt(t, filepath.Join(t.TempDir(), "commlab.db"))
}

// newExamLabEnvAt is newExamLabEnv on the database at dbPath: a second one on
// the same path stands for the server after a restart.
func newExamLabEnvAt(t *testing.T, dbPath string) (*examEnv, *labEnv) {
	t.Helper()
	e := newExamEnv(t, dbPath)
	host := &fakeHost{}
	ctx, cancel := context.WithCancel(context.Background())
	mgr := session.NewManager(ctx, session.Config{Provider: host, Faults: host, DataDir: t.TempDir(), NoStream: true,
		Log: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { mgr.Shutdown(); cancel() })
	e.srv.labs = mgr
	return e, &labEnv{testEnv: e.testEnv, host: host, mgr: mgr}
}

// marked is what the lab shell prints around a command (record.ShellRC); the
// fake shell echoes it back, so it lands in the recording as a real one does.
func marked(line, output string) []byte {
	return []byte("\x1b]6973;E;" + base64.StdEncoding.EncodeToString([]byte(line)) + "\x07\x1b]6973;C\x07" + output + "\r\n\x1b]6973;D;0\x07")
}

func waitConfirmed(t *testing.T, e *examEnv, path string) stateView {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var st stateView
		_, body, _ := e.do(e.c, "GET", path+"/state", nil)
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatalf("state: %v\n%s", err, body)
		}
		if st.Confirmed {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("lab %s not confirmed: %+v", path, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestExamLiveLab: a lab task starts a lab for the candidate; its page and
// payloads name neither the scenario nor the fault and offer no hint, check,
// give-up or stop; the clock pauses while it starts; the diagnosis is graded
// by the server into the attempt and ends the lab; its commands are kept and
// shown to staff; submitting the exam ends the other lab running.
func TestExamLiveLab(t *testing.T) {
	e, le := newExamLabEnv(t)
	ctx := context.Background()
	staff := newClient()
	e.register(staff, "proctor@example.com") // the first account is the admin
	e.register(e.c, "cand@example.com")
	aid := e.start(e.c)
	a0, _ := e.st.Attempt(ctx, aid)
	m12, _ := e.srv.exams.Get("m12")
	var labTasks []int
	for _, tk := range e.srv.exams.Tasks(m12, a0.Seed) {
		if tk.Lab() {
			labTasks = append(labTasks, tk.Index)
		}
	}
	if len(labTasks) < 2 {
		t.Fatalf("m12 drew %d lab tasks", len(labTasks))
	}
	first, second := labTasks[0], labTasks[1]
	attempt := fmt.Sprintf("/attempt/%d", aid)
	tok := e.csrf(e.c, attempt)
	post := func(path string, form url.Values) (int, string, http.Header) {
		t.Helper()
		if form == nil {
			form = url.Values{}
		}
		form.Set("csrf_token", tok)
		return e.do(e.c, "POST", path, form)
	}

	code, body, h := post(fmt.Sprintf("%s/lab/%d", attempt, first), nil)
	if code != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/lab/") {
		t.Fatalf("start the lab task: %d %s", code, body)
	}
	path := h.Get("Location")
	waitConfirmed(t, e, path)
	lab, err := le.mgr.Get(a0.UserID, strings.TrimPrefix(path, "/lab/"))
	if err != nil {
		t.Fatal(err)
	}
	sc := lab.Variant.Scenario
	if cur, ok := le.mgr.Current(a0.UserID); !ok || cur.ID != lab.ID {
		t.Fatalf("the manager's current lab is %v, want the exam's", cur)
	}
	if l, ok := e.srv.practiceLab(a0.UserID); ok {
		t.Errorf("practiceLab returned the exam's lab %s: workshop pages and instructor faults would reach it", l.ID)
	}

	// The clock paused while the lab started: the deadline moved by its start-up.
	var a1 *store.Attempt
	for i := 0; i < 100; i++ {
		if a1, _ = e.st.Attempt(ctx, aid); a1.Deadline.After(a0.Deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !a1.Deadline.After(a0.Deadline) || a1.Deadline.Sub(a0.Deadline) > time.Minute {
		t.Errorf("deadline %s after the lab start, was %s: want it later by the start-up", a1.Deadline, a0.Deadline)
	}

	// Nothing the candidate receives names the scenario or the fault.
	// (The chapter id is left out: the theory questions' refs name chapters.)
	terms := append(leakTerms(lab.Variant, t), sc.ID, sc.Title)
	if v := lab.Variant.Debrief(); len(v) > 20 {
		terms = append(terms, v[:20])
	}
	var found []string
	_, page, _ := e.do(e.c, "GET", path, nil)
	found = append(found, leaks("exam lab page", classSelect.ReplaceAllString(page, ""), terms)...)
	for _, p := range []string{"/state", "/commands"} {
		_, body, _ := e.do(e.c, "GET", path+p, nil)
		found = append(found, leaks(p, body, terms)...)
	}
	found = append(found, leaks("chart frames", strings.Join(le.ws(path+"/metrics/ws", nil), "\n"), terms)...)
	node := lab.Status().Nodes[0]
	found = append(found, leaks("terminal frames", strings.Join(le.ws(path+"/term/"+node+"/ws", marked("ip -s link show", "RX errors 0")), ""), terms)...)
	_, apage, _ := e.do(e.c, "GET", attempt, nil)
	// The attempt page has every lab task's statement, which may name what this
	// lab's fault touches (the statements are meant to be read): only names here.
	found = append(found, leaks("attempt page", apage, []string{sc.ID, sc.Title})...)
	_, intro, _ := e.do(e.c, "GET", "/labs/ch08-mtu-mismatch", nil)
	if strings.Contains(intro, `id="running-lab"`) {
		found = append(found, "a lab intro page names the running exam lab")
	}
	for _, f := range found {
		t.Error(f)
	}
	for _, want := range []string{fmt.Sprintf(`action="%s/lab/%d/diagnosis"`, attempt, first), `data-deadline=`, `id="back-to-exam"`} {
		if !strings.Contains(page, want) {
			t.Errorf("exam lab page lacks %s", want)
		}
	}
	for _, not := range []string{"/hint/", `id="check-answer"`, "/giveup", "/stop", "/course/"} {
		if strings.Contains(page, not) {
			t.Errorf("exam lab page offers %s", not)
		}
	}
	if !strings.Contains(apage, `href="`+path+`"`) {
		t.Error("the attempt page does not link the running lab")
	}

	// The lab page's own grading, hints, give-up and stop are refused.
	for _, p := range []string{"/hint/1", "/check", "/submit", "/giveup", "/stop"} {
		if code, _, _ := post(path+p, url.Values{"class": {sc.Diagnosis.Class}}); code != http.StatusConflict {
			t.Errorf("POST %s on an exam lab: %d, want 409", p, code)
		}
	}
	// One lab at a time; the same task opens its running lab.
	if code, _, _ := post(fmt.Sprintf("%s/lab/%d", attempt, second), nil); code != http.StatusConflict {
		t.Errorf("a second lab task while one runs: %d, want 409", code)
	}
	if _, _, h := post(fmt.Sprintf("%s/lab/%d", attempt, first), nil); h.Get("Location") != path {
		t.Errorf("the same task again went to %q, want its running lab %s", h.Get("Location"), path)
	}

	// The right class and location: graded by the server into the attempt; the lab ends.
	form := url.Values{"class": {sc.Diagnosis.Class}}
	for k, v := range lab.Variant.Location() {
		form.Set(k, v)
	}
	if code, body, h := post(fmt.Sprintf("%s/lab/%d/diagnosis", attempt, first), form); code != http.StatusSeeOther || !strings.HasSuffix(h.Get("Location"), fmt.Sprintf("#task-%d", first)) {
		t.Fatalf("diagnosis: %d %s", code, body)
	}
	select {
	case <-lab.Ended():
	case <-time.After(10 * time.Second):
		t.Fatal("the graded exam lab did not end")
	}
	tasks, _ := e.st.Tasks(ctx, aid)
	if len(tasks) != 1 || tasks[0].Task != first || !tasks[0].Graded || tasks[0].Score < 0.7 || !strings.Contains(tasks[0].Report, "class 0.") {
		t.Errorf("graded tasks = %+v", tasks)
	}
	if code, _, _ := post(fmt.Sprintf("%s/lab/%d", attempt, first), nil); code != http.StatusConflict {
		t.Errorf("restart a graded lab task: %d, want 409", code)
	}
	_, apage, _ = e.do(e.c, "GET", attempt, nil)
	if strings.Contains(apage, "data-score=") || !strings.Contains(apage, `data-diagnosed="true"`) {
		t.Error("the attempt page shows a lab's score before the end, or not that its diagnosis is in")
	}

	// A second lab runs when the candidate submits the exam: it ends with the attempt.
	code, _, h = post(fmt.Sprintf("%s/lab/%d", attempt, second), nil)
	if code != http.StatusSeeOther {
		t.Fatalf("start the second lab task: %d", code)
	}
	waitConfirmed(t, e, h.Get("Location"))
	lab2, _ := le.mgr.Get(a0.UserID, strings.TrimPrefix(h.Get("Location"), "/lab/"))
	le.ws(h.Get("Location")+"/term/"+lab2.Status().Nodes[0]+"/ws", marked("ethtool -S eth0", "rx_crc_errors: 0"))
	if code, _, _ := post(attempt+"/submit", nil); code != http.StatusSeeOther {
		t.Fatalf("submit: %d", code)
	}
	select {
	case <-lab2.Ended():
	default:
		t.Error("the exam ended while a lab of it still runs")
	}
	if len(e.srv.xlabs.ofAttempt(aid)) != 0 {
		t.Error("the server still tracks labs of an ended attempt")
	}
	_, apage, _ = e.do(e.c, "GET", attempt, nil)
	if !strings.Contains(apage, `id="exam-result"`) || !strings.Contains(apage, "class 0.") {
		t.Errorf("the result page does not show what the lab's score rests on")
	}

	// Staff see the commands typed in both labs, with their task and node.
	_, review, _ := e.do(staff, "GET", fmt.Sprintf("/admin/exams/attempt/%d", aid), nil)
	for _, want := range []string{"ip -s link show", "ethtool -S eth0", fmt.Sprintf("<td>%d</td><td>%s</td>", first+1, node)} {
		if !strings.Contains(review, want) {
			t.Errorf("review page lacks %q", want)
		}
	}
}

// TestExamClockPausesWhileLabStarts: a deadline that passes while a lab is
// still starting does not end the attempt; once the lab is up the deadline
// has moved by the start-up; a time-out then ends the attempt and its lab.
func TestExamClockPausesWhileLabStarts(t *testing.T) {
	e, le := newExamLabEnv(t)
	ctx := context.Background()
	le.host.gate = make(chan struct{})
	e.register(e.c, "slow@example.com")
	aid := e.start(e.c)
	a0, _ := e.st.Attempt(ctx, aid)
	m12, _ := e.srv.exams.Get("m12")
	task := -1
	for _, tk := range e.srv.exams.Tasks(m12, a0.Seed) {
		if tk.Lab() && task < 0 {
			task = tk.Index
		}
	}
	attempt := fmt.Sprintf("/attempt/%d", aid)
	tok := e.csrf(e.c, attempt)
	// The stored deadline is near enough to pass while the lab starts, far enough that a
	// busy machine still starts the lab (and pauses the clock) before it.
	const left = 5 * time.Second
	setDeadline(t, e.path, aid, time.Now().Add(left))
	code, _, h := e.do(e.c, "POST", fmt.Sprintf("%s/lab/%d", attempt, task), url.Values{"csrf_token": {tok}})
	if code != http.StatusSeeOther {
		t.Fatalf("start the lab task: %d", code)
	}
	path := h.Get("Location")
	const startUp = left + 1500*time.Millisecond
	time.Sleep(startUp) // the stored deadline passes while the lab starts
	_, page, _ := e.do(e.c, "GET", path, nil)
	if !strings.Contains(page, `id="clock-paused"`) {
		t.Error("the starting exam lab's page does not say the clock is paused")
	}
	_, apage, _ := e.do(e.c, "GET", attempt, nil)
	if a, _ := e.st.Attempt(ctx, aid); a.State != store.AttemptActive || strings.Contains(apage, `id="exam-result"`) {
		t.Fatalf("the attempt ended while its lab was starting: %+v", a)
	}
	close(le.host.gate)
	waitConfirmed(t, e, path)
	var a *store.Attempt
	for i := 0; i < 100; i++ {
		if a, _ = e.st.Attempt(ctx, aid); time.Until(a.Deadline) > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if rest := time.Until(a.Deadline); rest <= 0 || rest > left {
		t.Errorf("after a %s start-up the attempt has %s left, want the %s it had (less the moments since)", startUp, rest, left)
	}
	lab, _ := le.mgr.Get(a0.UserID, strings.TrimPrefix(path, "/lab/"))

	// Time runs out with the lab up: the next request submits the attempt and ends the lab.
	setDeadline(t, e.path, aid, time.Now().Add(-time.Second))
	_, apage, _ = e.do(e.c, "GET", attempt, nil)
	if !strings.Contains(apage, `data-auto="true"`) {
		t.Error("the timed-out attempt was not auto-submitted")
	}
	select {
	case <-lab.Ended():
	default:
		t.Error("the time-out left the exam's lab running")
	}
}

// TestExamLabAcrossRestart: a server that stops keeps the commands of the
// exam labs it ran with their attempts (the labs end with it). After the
// restart the ungraded lab task starts again with the same variant, the clock
// pauses again for its start-up, and once graded it cannot start again.
func TestExamLabAcrossRestart(t *testing.T) {
	e, le := newExamLabEnv(t)
	ctx := context.Background()
	e.register(e.c, "stop@example.com")
	aid := e.start(e.c)
	a, _ := e.st.Attempt(ctx, aid)
	m12, _ := e.srv.exams.Get("m12")
	task := -1
	for _, tk := range e.srv.exams.Tasks(m12, a.Seed) {
		if tk.Lab() && task < 0 {
			task = tk.Index
		}
	}
	attempt := fmt.Sprintf("/attempt/%d", aid)
	_, _, h := e.do(e.c, "POST", fmt.Sprintf("%s/lab/%d", attempt, task), url.Values{"csrf_token": {e.csrf(e.c, attempt)}})
	path := h.Get("Location")
	st := waitConfirmed(t, e, path)
	le.ws(path+"/term/"+st.Nodes[0]+"/ws", marked("ss -tn", "ESTAB 0 0"))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	stop() // shut down at once
	if err := e.srv.Serve(sctx, ln); err != nil {
		t.Fatal(err)
	}
	cmds, _ := e.st.Commands(ctx, aid)
	if len(cmds) != 1 || cmds[0].Command != "ss -tn" || cmds[0].Task != task || cmds[0].Node != st.Nodes[0] {
		t.Errorf("commands kept at shutdown: %+v", cmds)
	}

	// The process ends, and its labs with it; a new one opens the same database.
	first, _ := le.mgr.Get(a.UserID, strings.TrimPrefix(path, "/lab/"))
	le.mgr.Shutdown()
	<-first.Ended()
	before, _ := e.st.Attempt(ctx, aid)
	e.st.Close()
	e2, le2 := newExamLabEnvAt(t, e.path)
	e2.c = e.c
	if _, page, _ := e2.do(e2.c, "GET", attempt, nil); !strings.Contains(page, fmt.Sprintf(`data-start-lab="%d"`, task)) {
		t.Fatalf("after the restart the attempt page offers no start of lab task %d:\n%s", task, page)
	}
	tok := e2.csrf(e2.c, attempt)
	code, body, h := e2.do(e2.c, "POST", fmt.Sprintf("%s/lab/%d", attempt, task), url.Values{"csrf_token": {tok}})
	if code != http.StatusSeeOther || h.Get("Location") == path {
		t.Fatalf("start lab task %d again after the restart: %d %s %v", task, code, body, h.Get("Location"))
	}
	waitConfirmed(t, e2, h.Get("Location"))
	again, err := le2.mgr.Get(a.UserID, strings.TrimPrefix(h.Get("Location"), "/lab/"))
	if err != nil {
		t.Fatal(err)
	}
	if again.Variant.Scenario.ID != first.Variant.Scenario.ID || !maps.Equal(again.Variant.Values, first.Variant.Values) {
		t.Errorf("after the restart the task drew %s %v, before %s %v", again.Variant.Scenario.ID, again.Variant.Values,
			first.Variant.Scenario.ID, first.Variant.Values)
	}
	var after *store.Attempt
	for i := 0; i < 100; i++ {
		if after, _ = e2.st.Attempt(ctx, aid); after.Deadline.After(before.Deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !after.Deadline.After(before.Deadline) || after.Deadline.Sub(before.Deadline) > time.Minute {
		t.Errorf("deadline %s after the second start-up, was %s: want it later by the start-up", after.Deadline, before.Deadline)
	}
	form := url.Values{"csrf_token": {tok}, "class": {again.Variant.Scenario.Diagnosis.Class}}
	for k, v := range again.Variant.Location() {
		form.Set(k, v)
	}
	if code, body, _ := e2.do(e2.c, "POST", fmt.Sprintf("%s/lab/%d/diagnosis", attempt, task), form); code != http.StatusSeeOther {
		t.Fatalf("diagnosis after the restart: %d %s", code, body)
	}
	if code, _, _ := e2.do(e2.c, "POST", fmt.Sprintf("%s/lab/%d", attempt, task), url.Values{"csrf_token": {tok}}); code != http.StatusConflict {
		t.Errorf("start the graded lab task: %d, want 409", code)
	}
}
