package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/commlab/commlab/course"
	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/server/store"
	"github.com/commlab/commlab/web"
)

// replica is one server of a two-replica test: its own lab manager (on a fake
// host), the store shared with the other.
type replica struct {
	*labEnv
	srv *Server
	hs  *httptest.Server
	// hops counts the requests another replica forwarded here.
	hops atomic.Int64
}

func startReplica(t *testing.T, st store.Store, c *http.Client) *replica {
	t.Helper()
	lib, err := course.NewLibrary(fixture, course.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return startReplicaOf(t, st, c, Deps{Library: lib, Scenarios: catalog(t)})
}

// startReplicaOf is startReplica serving d's course, scenarios and exams.
func startReplicaOf(t *testing.T, st store.Store, c *http.Client, d Deps) *replica {
	t.Helper()
	r := &replica{hs: httptest.NewServer(nil)}
	t.Cleanup(r.hs.Close)
	host := &fakeHost{}
	ctx, cancel := context.WithCancel(context.Background())
	mgr := session.NewManager(ctx, session.Config{Provider: host, Faults: host, DataDir: t.TempDir(), NoStream: true,
		Log: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { mgr.Shutdown(); cancel() })
	d.Store, d.Secret, d.Labs, d.Log = st, []byte("0123456789abcdef0123456789abcdef"), mgr, slog.New(slog.DiscardHandler)
	srv, err := New(Config{Advertise: r.hs.URL}, d)
	if err != nil {
		t.Fatal(err)
	}
	h := srv.Handler()
	r.hs.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get(hopHeader) != "" {
			r.hops.Add(1)
		}
		h.ServeHTTP(w, req)
	})
	r.srv = srv
	r.labEnv = &labEnv{testEnv: &testEnv{t: t, url: r.hs.URL, store: st, c: c}, host: host, mgr: mgr}
	return r
}

// TestReplicasForwardLabs: a lab started on replica A is served through replica
// B (page, state, answers, terminal) for its learner only, who cannot start a
// second lab on B; B never forwards a forwarded request, says so when A is
// gone, and then lets the learner start anew.
func TestReplicasForwardLabs(t *testing.T) {
	st, err := store.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "commlab.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	alice := newClient() // cookies ignore the port: one login holds on both replicas
	a, b := startReplica(t, st, alice), startReplica(t, st, alice)
	a.register(alice, "alice@example.com")
	lab := a.startLab("ch01-tour", nil)
	id := strings.TrimPrefix(lab, "/lab/")
	if o, err := st.LabOwner(context.Background(), id); err != nil || o.Replica != a.hs.URL {
		t.Fatalf("owner of %s = %+v, %v; want %s", id, o, err, a.hs.URL)
	}

	for path, want := range map[string]string{lab: "node1", lab + "/state": `"confirmed":true`, lab + "/commands": `"commands"`} {
		if code, body, _ := b.do(alice, "GET", path, nil); code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("GET %s through B: %d, want 200 and %s\n%.300s", path, code, want, body)
		}
	}
	if _, _, h := b.do(alice, "GET", lab, nil); len(h.Values("Content-Security-Policy")) != 1 || h.Get("Content-Security-Policy") != labCSP() {
		t.Errorf("lab page through B: CSP %q, want A's one policy %q", h.Values("Content-Security-Policy"), labCSP())
	}
	if frames := strings.Join(b.ws(lab+"/term/node1/ws", []byte("echo through-b\n")), ""); !strings.Contains(frames, "echo through-b") {
		t.Errorf("terminal through B: %q, want the echo", frames)
	}
	// An answer through B: B's page gives the token (keys are shared), A grades.
	tok := b.csrf(alice, lab)
	if code, body, _ := b.do(alice, "POST", lab+"/check", url.Values{"csrf_token": {tok}, "class": {"nic-rate-limited"}}); code != http.StatusSeeOther {
		t.Errorf("check through B: %d\n%.300s", code, body)
	}
	if code, _, _ := b.do(alice, "POST", lab+"/check", url.Values{"class": {"nic-rate-limited"}}); code != http.StatusForbidden {
		t.Errorf("check through B without a CSRF token: %d, want 403 (from A)", code)
	}
	// B's lab pages name the running lab and link it (forwarded to A).
	for _, intro := range []string{"/labs/ch01-tour", "/labs/ch08-link-loss"} {
		if _, body, _ := b.do(alice, "GET", intro, nil); !strings.Contains(body, `id="running-lab"`) || !strings.Contains(body, `href="`+lab+`"`) {
			t.Errorf("%s through B does not link the lab running on A", intro)
		}
	}
	// One running lab per learner holds across replicas: B refuses a second.
	start := url.Values{"csrf_token": {b.csrf(alice, "/labs/ch01-tour")}}
	if code, body, _ := b.do(alice, "POST", "/labs/ch01-tour/start", start); code != http.StatusConflict {
		t.Errorf("a second lab through B: %d, want 409\n%.300s", code, body)
	}
	forwarded := a.hops.Load()
	if forwarded < 6 {
		t.Errorf("A saw %d forwarded requests, want 6 or more", forwarded)
	}

	// Not forwarded: someone else's request for the lab, and a request that
	// already made its hop.
	bob := newClient()
	b.register(bob, "bob@example.com")
	if code, _, _ := b.do(bob, "GET", lab+"/state", nil); code != http.StatusNotFound {
		t.Errorf("bob GET %s/state through B: %d, want 404", lab, code)
	}
	req, _ := http.NewRequest("GET", b.url+lab+"/state", nil)
	req.Header.Set(hopHeader, "http://elsewhere")
	if resp, err := alice.Do(req); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("a forwarded request for a lab B does not run: %v %v, want 404", resp, err)
	} else {
		resp.Body.Close()
	}
	if n := a.hops.Load(); n != forwarded {
		t.Errorf("A saw %d more forwarded requests, want none", n-forwarded)
	}

	// The owner gone: B says so, in a page and in JSON.
	a.hs.CloseClientConnections()
	a.hs.Close()
	code, body, _ := b.do(alice, "GET", lab, nil)
	if want := web.T("zh", "err.labowner"); code != http.StatusBadGateway || !strings.Contains(body, want) {
		t.Errorf("GET %s with A gone: %d, want 502 and %q\n%.300s", lab, code, want, body)
	}
	// A terminal is told in its own words, and stops reconnecting ("closed").
	if frames := strings.Join(b.ws(lab+"/term/node1/ws", nil), ""); !strings.Contains(frames, `"type":"closed"`) || !strings.Contains(frames, web.T("zh", "err.labowner")) {
		t.Errorf("terminal with A gone: %q, want the closed notice", frames)
	}
	req, _ = http.NewRequest("GET", b.url+lab+"/state", nil)
	req.Header.Set("Accept", "application/json")
	req.AddCookie(&http.Cookie{Name: langCookie, Value: "en"})

	resp, err := alice.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	j, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := web.T("en", "err.labowner"); resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(j), want) {
		t.Errorf("state with A gone: %d %s, want 502 and %q", resp.StatusCode, j, want)
	}

	// A's labs ended with it: alice starts anew on B.
	lab2 := b.startLab("ch01-tour", nil)
	if o, err := st.LabOwner(context.Background(), id); err != nil || o.EndedAt.IsZero() {
		t.Errorf("A's lab after a start on B: %+v, %v; want it ended", o, err)
	}
	// A lab that ends is recorded as ended.
	if code, body, _ := b.post(lab2+"/stop", url.Values{}, ""); code != http.StatusSeeOther {
		t.Fatalf("stop: %d\n%.300s", code, body)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		o, err := st.LabOwner(context.Background(), strings.TrimPrefix(lab2, "/lab/"))
		if err == nil && !o.EndedAt.IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stopped lab not recorded as ended: %+v, %v", o, err)
		}
	}
}

// TestReplicasOneLabAtOnce: one learner's lab starts sent at once to two
// replicas: exactly one starts a lab, every other is told that a lab runs.
func TestReplicasOneLabAtOnce(t *testing.T) {
	st, err := store.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "commlab.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	alice := newClient()
	a, b := startReplica(t, st, alice), startReplica(t, st, alice)
	a.register(alice, "alice@example.com")
	a.host.probe, b.host.probe = 50*time.Millisecond, 50*time.Millisecond // a start takes a moment on each
	const each = 8
	type answer struct {
		code int
		body string
		err  error
	}
	answers := make(chan answer, 2*each)
	forms := map[*replica]string{}
	for _, r := range []*replica{a, b} {
		forms[r] = url.Values{"csrf_token": {r.csrf(alice, "/labs/ch01-tour")}}.Encode()
	}
	var wg sync.WaitGroup
	go_ := make(chan struct{}) // the starts leave together
	for i := range 2 * each {
		r := []*replica{a, b}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", r.url+"/labs/ch01-tour/start", strings.NewReader(forms[r]))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			<-go_
			resp, err := alice.Do(req)
			if err != nil {
				answers <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			answers <- answer{code: resp.StatusCode, body: string(body)}
		}()
	}
	close(go_)
	wg.Wait()
	close(answers)
	started := 0
	for ans := range answers {
		switch {
		case ans.code == http.StatusSeeOther:
			started++
		case ans.code != http.StatusConflict || !strings.Contains(ans.body, web.T("zh", "err.labbusy")):
			t.Errorf("a start: %d %v, want 303 or 409 with %q\n%.300s", ans.code, ans.err, web.T("zh", "err.labbusy"), ans.body)
		}
	}
	u, err := st.UserByEmail(context.Background(), "alice@example.com")
	if err != nil {
		t.Fatal(err)
	}
	running, err := st.RunningLabs(context.Background(), u.ID)
	labs := 0
	for _, r := range []*replica{a, b} {
		for _, l := range r.mgr.All() {
			if l.Running() {
				labs++
			}
		}
	}
	if started != 1 || labs != 1 || err != nil || len(running) != 1 {
		t.Errorf("%d of %d starts succeeded, %d labs run, the store has %d (%v); want one of each", started, 2*each, labs, len(running), err)
	}
}

// TestReplicasExamLab: an exam task's lab that replica A runs is linked from
// the attempt page that B serves, and opening it or diagnosing it through B
// reaches A, which grades it into the attempt.
func TestReplicasExamLab(t *testing.T) {
	dir := t.TempDir()
	st, err := store.OpenSQLite(context.Background(), filepath.Join(dir, "commlab.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cand := newClient()
	d := examDeps(t, dir)
	a, b := startReplicaOf(t, st, cand, d), startReplicaOf(t, st, cand, d)
	a.register(cand, "cand@example.com")
	_, _, h := a.do(cand, "POST", "/exams/m12/start", url.Values{"csrf_token": {a.csrf(cand, "/exams/m12")}})
	m := attemptRe.FindStringSubmatch(h.Get("Location"))
	if m == nil {
		t.Fatalf("start the exam: went to %q", h.Get("Location"))
	}
	attempt := m[0]
	var aid int64
	fmt.Sscan(m[1], &aid)
	at, err := st.Attempt(context.Background(), aid)
	if err != nil {
		t.Fatal(err)
	}
	m12, _ := d.Exams.Get("m12")
	var labTasks []int
	for _, tk := range a.srv.exams.Tasks(m12, at.Seed) {
		if tk.Lab() {
			labTasks = append(labTasks, tk.Index)
		}
	}
	if len(labTasks) < 2 {
		t.Fatalf("m12 drew %d lab tasks, want 2 or more", len(labTasks))
	}
	task := labTasks[0]
	open := fmt.Sprintf("%s/lab/%d", attempt, task)
	_, _, h = a.do(cand, "POST", open, url.Values{"csrf_token": {a.csrf(cand, attempt)}})
	lab := h.Get("Location")
	if !strings.HasPrefix(lab, "/lab/") {
		t.Fatalf("start task %d's lab on A: went to %q", task, lab)
	}
	l, err := a.mgr.Get(at.UserID, strings.TrimPrefix(lab, "/lab/"))
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !l.Status().Confirmed; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("lab %s not confirmed: %+v", lab, l.Status())
		}
	}

	if _, page, _ := b.do(cand, "GET", attempt, nil); !strings.Contains(page, `href="`+lab+`" data-open-lab`) {
		t.Errorf("the attempt page through B does not link the lab running on A")
	}
	tok := b.csrf(cand, attempt)
	if code, _, h := b.do(cand, "POST", open, url.Values{"csrf_token": {tok}}); code != http.StatusSeeOther || h.Get("Location") != lab {
		t.Errorf("open task %d's lab through B: %d to %q, want its lab on A, %s", task, code, h.Get("Location"), lab)
	}
	form := url.Values{"csrf_token": {tok}, "class": {l.Variant.Scenario.Diagnosis.Class}}
	for k, v := range l.Variant.Location() {
		form.Set(k, v)
	}
	if code, body, _ := b.do(cand, "POST", open+"/diagnosis", form); code != http.StatusSeeOther {
		t.Fatalf("diagnose through B: %d\n%.300s", code, body)
	}
	if tasks, err := st.Tasks(context.Background(), aid); err != nil || len(tasks) == 0 || !tasks[0].Graded || tasks[0].Score < 0.7 {
		t.Errorf("attempt tasks after the diagnosis through B: %+v, %v; want task %d graded (class and location right)", tasks, err, task)
	}
	select {
	case <-l.Ended():
	case <-time.After(10 * time.Second):
		t.Error("the graded lab on A did not end")
	}

	// The next task's lab runs on A, and A goes: B starts it anew.
	next := fmt.Sprintf("%s/lab/%d", attempt, labTasks[1])
	if _, _, h := a.do(cand, "POST", next, url.Values{"csrf_token": {tok}}); !strings.HasPrefix(h.Get("Location"), "/lab/") {
		t.Fatalf("start task %d's lab on A: went to %q", labTasks[1], h.Get("Location"))
	}
	a.hs.CloseClientConnections()
	a.hs.Close()
	_, _, h = b.do(cand, "POST", next, url.Values{"csrf_token": {tok}})
	if _, err := b.mgr.Get(at.UserID, strings.TrimPrefix(h.Get("Location"), "/lab/")); err != nil {
		t.Errorf("task %d's lab with A gone: went to %q, want a lab on B (%v)", labTasks[1], h.Get("Location"), err)
	}
	// Submitted through B, the attempt ends B's lab; A (its HTTP gone, its
	// process not) ends its own at its next sweep.
	if code, body, _ := b.do(cand, "POST", attempt+"/submit", url.Values{"csrf_token": {tok}}); code != http.StatusSeeOther {
		t.Fatalf("submit through B: %d\n%.300s", code, body)
	}
	a.srv.sweepAttemptsOnce(context.Background())
	for _, r := range []*replica{a, b} {
		for _, l := range r.mgr.All() {
			if l.Running() {
				t.Errorf("lab %s of the submitted attempt still runs on %s", l.ID, r.url)
			}
		}
	}
}

// TestDrain: a draining replica starts no lab and says why, tells the
// learner at the terminal, serves the running lab on, and is idle once it ends.
func TestDrain(t *testing.T) {
	st, err := store.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "commlab.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	alice := newClient()
	a := startReplica(t, st, alice)
	a.register(alice, "alice@example.com")
	lab := a.startLab("ch01-tour", nil)
	idle := a.srv.Drain()
	start := url.Values{"csrf_token": {a.csrf(alice, "/labs/ch08-link-loss")}}
	if code, body, _ := a.do(alice, "POST", "/labs/ch08-link-loss/start", start); code != http.StatusServiceUnavailable || !strings.Contains(body, web.T("zh", "err.draining")) {
		t.Errorf("a start while draining: %d, want 503 with %q\n%.300s", code, web.T("zh", "err.draining"), body)
	}
	frames := strings.Join(a.ws(lab+"/term/node1/ws", []byte("echo still-here\n")), "")
	if !strings.Contains(frames, `"type":"notice"`) || !strings.Contains(frames, web.T("zh", "lab.draining")) || !strings.Contains(frames, "echo still-here") {
		t.Errorf("terminal while draining: %q, want the drain notice and the echo", frames)
	}
	select {
	case <-idle:
		t.Fatal("idle while a lab runs")
	default:
	}
	if code, body, _ := a.post(lab+"/stop", url.Values{}, ""); code != http.StatusSeeOther {
		t.Fatalf("stop: %d\n%.300s", code, body)
	}
	select {
	case <-idle:
	case <-time.After(10 * time.Second):
		t.Fatal("not idle 10 s after its only lab stopped")
	}
}

// TestSingleServerRecordsNoOwner: without Advertise nothing is recorded.
func TestSingleServerRecordsNoOwner(t *testing.T) {
	e := newLabEnv(t)
	e.register(e.c, "solo@example.com")
	lab := e.startLab("ch01-tour", nil)
	if o, err := e.store.(store.LabOwners).LabOwner(context.Background(), strings.TrimPrefix(lab, "/lab/")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("owner recorded without Advertise: %+v, %v", o, err)
	}
}

func TestAdvertisedURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8081": "http://127.0.0.1:8081", "https://a.example:443/": "https://a.example:443",
		"127.0.0.1:8081": "", "http://a/x": "", "ftp://a": "", "http://u@a:1": "", "http://": "",
	} {
		got, err := advertisedURL(in)
		if got != want || (err == nil) != (want != "") {
			t.Errorf("advertisedURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// TestReplicasWorkshop: an instructor served by replica B sees and steers a
// workshop lab that runs on replica A: its row on the dashboard, an extra
// fault, a hint, more time, the read-only terminal and a reset.
func TestReplicasWorkshop(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "commlab.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	alice, inst := newClient(), newClient()
	a, b := startReplica(t, st, alice), startReplica(t, st, inst)
	b.register(inst, "inst@example.com") // the first account is an admin
	a.register(alice, "alice@example.com")
	ids := map[*http.Client]int64{}
	for c, email := range map[*http.Client]string{alice: "alice@example.com", inst: "inst@example.com"} {
		u, err := st.UserByEmail(ctx, email)
		if err != nil {
			t.Fatal(err)
		}
		ids[c] = u.ID
	}
	if err := st.SetRole(ctx, ids[inst], store.RoleInstructor); err != nil {
		t.Fatal(err)
	}
	w := &store.Workshop{InstructorID: ids[inst], Title: "t", Code: "TWOREPS", Labs: []string{"ch08-link-loss"}, Opened: 1,
		LabTTL: 30 * time.Minute, StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour)}
	if err := st.CreateWorkshop(ctx, w); err != nil {
		t.Fatal(err)
	}
	if err := st.JoinWorkshop(ctx, w.ID, ids[alice]); err != nil {
		t.Fatal(err)
	}
	path := fmt.Sprintf("/workshops/%d", w.ID)
	wa, wb := &workshopEnv{labEnv: a.labEnv, inst: inst}, &workshopEnv{labEnv: b.labEnv, inst: inst}

	code, body, h := wa.postAs(alice, path, path+"/labs/1/start", url.Values{}, "")
	if code != http.StatusSeeOther {
		t.Fatalf("start on A: %d\n%.300s", code, body)
	}
	labPath := h.Get("Location")
	l, ok := a.mgr.Current(ids[alice])
	if !ok {
		t.Fatal("no lab on A")
	}
	for deadline := time.Now().Add(10 * time.Second); l.Status().State != session.Ready; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("lab not ready: %+v", l.Status())
		}
	}

	row := func() dashLearner {
		t.Helper()
		d := wb.dashboardNow(path)
		if len(d.Learners) != 1 {
			t.Fatalf("dashboard through B: %+v", d)
		}
		return d.Learners[0]
	}
	if r := row(); r.Cells[0].State != "working" || r.Running != 0 || len(r.Nodes) != 4 || r.Idle < 0 {
		t.Errorf("alice's row through B: %+v, want her lab on A working", r)
	}

	learner := fmt.Sprint(ids[alice])
	for _, tc := range []struct {
		action string
		form   url.Values
		want   string
	}{
		{"inject", url.Values{"learner": {learner}, "kind": {"loss"}, "node": {"node3"}}, `"injected":1`},
		{"hint", url.Values{"lab": {"1"}, "n": {"1"}}, `"given":1`},
		{"extend", url.Values{"learner": {"0"}, "minutes": {"15"}}, `"extended":1`},
	} {
		if code, body, _ := wb.postAs(inst, path, path+"/"+tc.action, tc.form, "application/json"); code != http.StatusOK || !strings.Contains(body, tc.want) {
			t.Errorf("%s through B: %d %s, want 200 and %s", tc.action, code, body, tc.want)
		}
	}
	if got := l.Injected(); len(got) == 0 || !strings.HasPrefix(got[len(got)-1], "node3: inject loss") {
		t.Errorf("injected on A: %q", got)
	}
	if open := l.HintsOpen(); len(open) != 1 || open[0] != 0 {
		t.Errorf("hints open on A: %v, want hint 1", open)
	}
	if left := time.Until(l.Status().Expires); left < 44*time.Minute || left > 45*time.Minute {
		t.Errorf("lab on A ends in %s, want 30m + 15m", left)
	}
	// Alice's feed and workshop page through B follow her lab on A.
	var live learnerLive
	if frames := wb.wsAs(alice, path+"/events/ws", nil); len(frames) == 0 || json.Unmarshal([]byte(frames[0]), &live) != nil || live.Lab == nil ||
		live.Lab.ID != l.ID || !live.Lab.Expires.Equal(l.Status().Expires) || len(live.Lab.Hints) != 1 {
		t.Errorf("alice's feed through B: %+v", live)
	}
	if _, page, _ := b.do(alice, "GET", path, nil); !strings.Contains(page, `href="/lab/`+l.ID+`" id="current-lab"`) {
		t.Error("alice's workshop page through B has no link to her lab on A")
	}
	if d := wb.dashboardNow(path); !strings.Contains(fmt.Sprint(d.Timeline), "loss · node3") {
		t.Errorf("the timeline through B lacks the fault: %+v", d.Timeline)
	}

	// The read-only view through B: alice's page and terminal, from A.
	if code, body, _ := b.do(inst, "GET", path+"/learners/"+learner, nil); code != http.StatusOK || !strings.Contains(body, "node1") {
		t.Errorf("alice's watch page through B: %d\n%.300s", code, body)
	}
	a.ws(labPath+"/term/node1/ws", []byte("learner-typed\r"))
	b.c = inst
	if seen := strings.Join(b.ws(path+"/learners/"+learner+"/term/node1/ws", []byte("instructor-typed\r")), ""); !strings.Contains(seen, "learner-typed") {
		t.Errorf("alice's terminal through B: %q", seen)
	}
	if seen := strings.Join(a.ws(labPath+"/term/node1/ws", nil), ""); strings.Contains(seen, "instructor-typed") {
		t.Errorf("the instructor's keys reached alice's shell: %q", seen)
	}

	// A reset through B ends the lab on A; the row says so.
	if code, body, _ := wb.postAs(inst, path, path+"/reset", url.Values{"learner": {learner}}, "application/json"); code != http.StatusOK {
		t.Errorf("reset through B: %d %s", code, body)
	}
	if l.Running() {
		t.Error("alice's lab on A runs after the reset")
	}
	if r := row(); r.Running != -1 || r.Cells[0].State != "notstarted" {
		t.Errorf("alice's row after the reset: %+v", r)
	}
	// The hop grants nothing: a learner's forwarded request for the rows or an
	// action is refused by the owner as any learner's is.
	for _, p := range []string{"/live/rows", "/learners/" + learner} {
		req, _ := http.NewRequest("GET", a.url+path+p, nil)
		req.Header.Set(hopHeader, b.url)
		if resp, err := alice.Do(req); err != nil || resp.StatusCode != http.StatusNotFound {
			t.Errorf("alice's forwarded GET %s: %v %v, want 404", p, resp, err)
		} else {
			resp.Body.Close()
		}
	}
	if code, _, _ := wb.postAs(alice, path, path+"/extend", url.Values{"learner": {"0"}, "minutes": {"5"}}, "application/json"); code != http.StatusNotFound {
		t.Errorf("alice extended through B: %d, want 404", code)
	}

	// Ending the workshop through B stops alice's new lab on A.
	if code, body, _ := wa.postAs(alice, path, path+"/labs/1/start", url.Values{}, ""); code != http.StatusSeeOther {
		t.Fatalf("start again on A: %d\n%.300s", code, body)
	}
	l, ok = a.mgr.Current(ids[alice])
	if !ok {
		t.Fatal("no new lab on A")
	}
	if code, body, _ := wb.postAs(inst, path, path+"/end", url.Values{}, "application/json"); code != http.StatusOK {
		t.Errorf("end through B: %d %s", code, body)
	}
	if l.Running() {
		t.Error("alice's lab on A runs after the workshop ended")
	}
	if a.hops.Load() < 8 {
		t.Errorf("A saw %d forwarded requests, want 8 or more", a.hops.Load())
	}
	if b.hops.Load() != 0 {
		t.Errorf("B saw %d forwarded requests, want none", b.hops.Load())
	}
}

// TestReplicasDashboardQueries: the rows that replica A gives B's dashboard
// cost the same store queries, on both replicas together, for one learner's
// lab on A as for five.
func TestReplicasDashboardQueries(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenSQLiteVia(ctx, "sqlite-counting", filepath.Join(t.TempDir(), "commlab.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	inst := newClient()
	a, b := startReplica(t, st, inst), startReplica(t, st, inst)
	b.register(inst, "inst@example.com")
	iu, err := st.UserByEmail(ctx, "inst@example.com")
	if err != nil {
		t.Fatal(err)
	}
	const lab = "ch08-link-loss"
	w := &store.Workshop{InstructorID: iu.ID, Title: "t", Code: "COUNTREPS", Labs: []string{lab}, Opened: 1,
		LabTTL: 30 * time.Minute, StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour)}
	if err := st.CreateWorkshop(ctx, w); err != nil {
		t.Fatal(err)
	}
	sc, err := a.srv.scenario(lab)
	if err != nil {
		t.Fatal(err)
	}
	members := 0
	grow := func(n int) {
		for ; members < n; members++ {
			u := joinLearner(t, st, w, members)
			if _, err := a.srv.startLab(ctx, store.LabOwner{LearnerID: u.ID}, sc.Draw(uint64(members)), time.Hour); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A snapshot as B's dashboard websocket makes it, with the instructor's cookie.
	req := httptest.NewRequest("GET", b.url+fmt.Sprintf("/workshops/%d/live/ws", w.ID), nil)
	u, _ := url.Parse(b.url)
	for _, ck := range inst.Jar.Cookies(u) {
		req.AddCookie(ck)
	}
	snapshot := func() (*dashboard, int64) {
		t.Helper()
		c, _ := gin.CreateTestContext(httptest.NewRecorder())
		c.Request = req
		d, err := b.srv.dashboard(ctx, w, "zh-CN", &commandCache{}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		before := statements.Load()
		if err := b.srv.elsewhereRows(c, w, d); err != nil {
			t.Fatal(err)
		}
		return d, statements.Load() - before
	}
	grow(1)
	d, one := snapshot()
	grow(5)
	d5, five := snapshot()
	for _, d := range []*dashboard{d, d5} {
		for _, l := range d.Learners {
			if l.Running != 0 {
				t.Errorf("%s's row through B: %+v, want the lab on A running", l.Name, l)
			}
		}
	}
	t.Logf("queries: %d for 1, %d for 5", one, five)
	if len(d5.Learners) != 5 || one != five {
		t.Errorf("the rows from A: %d queries for 1 learner, %d for %d; want the same", one, five, len(d5.Learners))
	}
}
