package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/server/store"
)

// The workshop runs here on the lab handlers' fake host (labpages_test.go): the
// instructor, two learners and an outsider are real accounts with real sessions.

type workshopEnv struct {
	*labEnv
	inst, a, b, outsider *http.Client
	ids                  map[*http.Client]int64
}

func newWorkshopEnv(t *testing.T) *workshopEnv {
	e := &workshopEnv{labEnv: newLabEnv(t), ids: map[*http.Client]int64{}}
	for i, c := range []**http.Client{&e.inst, &e.a, &e.b, &e.outsider} {
		*c = newClient()
		email := fmt.Sprintf("u%d@example.com", i)
		e.register(*c, email)
		u, err := e.store.UserByEmail(context.Background(), email)
		if err != nil {
			t.Fatal(err)
		}
		e.ids[*c] = u.ID
	}
	if err := e.store.SetRole(context.Background(), e.ids[e.inst], store.RoleInstructor); err != nil {
		t.Fatal(err)
	}
	return e
}

// postAs posts a form as c, with a CSRF token from page.
func (e *workshopEnv) postAs(c *http.Client, page, path string, form url.Values, accept string) (int, string, http.Header) {
	e.t.Helper()
	e.c = c
	form.Set("csrf_token", e.csrf(c, page))
	req, _ := http.NewRequest("POST", e.url+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// wsAs reads a websocket's first frames as c.
func (e *workshopEnv) wsAs(c *http.Client, path string, send []byte) []string {
	e.t.Helper()
	e.c = c
	return e.ws(path, send)
}

func (e *workshopEnv) dashboardNow(path string) dashboard {
	e.t.Helper()
	frames := e.wsAs(e.inst, path+"/live/ws", nil)
	if len(frames) == 0 {
		e.t.Fatal("the dashboard sent nothing")
	}
	var d dashboard
	if err := json.Unmarshal([]byte(frames[0]), &d); err != nil {
		e.t.Fatal(err)
	}
	return d
}

var joinCode = regexp.MustCompile(`class="join-code">([A-Z0-9]+)<`)

func TestWorkshop(t *testing.T) {
	e := newWorkshopEnv(t)
	const lab = "ch08-link-loss"

	// Creating: instructors only, and a bad form says what and where.
	if code, _, _ := e.postAs(e.a, "/workshops", "/workshops", url.Values{"title": {"x"}, "labs": {lab}}, ""); code != http.StatusForbidden {
		t.Errorf("a learner created a workshop: %d", code)
	}
	for _, tc := range []struct {
		form url.Values
		want string
	}{
		{url.Values{"title": {"x"}, "labs": {" \n"}}, "labs: no lab"},
		{url.Values{"title": {"x"}, "labs": {lab + "\nch99-nope"}}, `line 2: no lab &#34;ch99-nope&#34;`},
		{url.Values{"title": {"x"}, "labs": {lab}, "ttl": {"2"}}, "ttl: minutes from 5 to 480"},
		{url.Values{"title": {"x"}, "labs": {lab}, "starts": {"2026-12-04T10:00"}, "ends": {"2026-12-04T09:00"}}, "ends: must come after the start"},
		{url.Values{"title": {"x"}, "labs": {lab}, "starts": {"tomorrow"}}, "starts: a time like"},
	} {
		code, body, _ := e.postAs(e.inst, "/workshops", "/workshops", tc.form, "")
		if code != http.StatusBadRequest || !strings.Contains(body, tc.want) {
			t.Errorf("create %v: %d, want 400 saying %q", tc.form, code, tc.want)
		}
	}
	code, body, h := e.postAs(e.inst, "/workshops", "/workshops", url.Values{"title": {"NCCL 工作坊"}, "labs": {lab + "\nch08-mtu-mismatch"}, "ttl": {"30"}}, "")
	if code != http.StatusSeeOther {
		t.Fatalf("create: %d\n%s", code, body)
	}
	path := h.Get("Location")
	e.c = e.inst
	_, page, _ := e.do(e.inst, "GET", path, nil)
	m := joinCode.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no join code on the instructor's page")
	}

	// Joining by code (case and dashes do not matter); outsiders see nothing.
	if code, _, _ := e.postAs(e.a, "/workshops", "/workshops/join", url.Values{"code": {"NOPE"}}, ""); code != http.StatusNotFound {
		t.Errorf("join with a wrong code: %d", code)
	}
	for _, c := range []*http.Client{e.a, e.b} {
		if code, _, h := e.postAs(c, "/workshops", "/workshops/join", url.Values{"code": {strings.ToLower(m[1][:4]) + "-" + m[1][4:]}}, ""); code != http.StatusSeeOther || h.Get("Location") != path {
			t.Fatalf("join: %d %s", code, h.Get("Location"))
		}
	}
	for _, p := range []string{path, path + "/learners/1"} {
		if code, _, _ := e.do(e.outsider, "GET", p, nil); code != http.StatusNotFound {
			t.Errorf("outsider GET %s: %d", p, code)
		}
	}
	if code, _, _ := e.do(e.a, "GET", path+fmt.Sprintf("/learners/%d", e.ids[e.b]), nil); code != http.StatusNotFound {
		t.Errorf("a learner watched another: %d", code)
	}

	// Labs open step by step.
	if code, _, _ := e.postAs(e.a, path, path+"/labs/1/start", url.Values{}, ""); code != http.StatusConflict {
		t.Errorf("start before the lab opened: %d", code)
	}
	if code, body, _ := e.postAs(e.inst, path, path+"/open", url.Values{"n": {"1"}}, "application/json"); code != http.StatusOK {
		t.Fatalf("open: %d %s", code, body)
	}
	if code, _, _ := e.postAs(e.a, path, path+"/labs/2/start", url.Values{}, ""); code != http.StatusConflict {
		t.Errorf("start lab 2 with only 1 open: %d", code)
	}
	// A full host refuses a workshop's lab up front, as it does any lab.
	e.host.mu.Lock()
	e.host.full = true
	e.host.mu.Unlock()
	if code, body, _ := e.postAs(e.a, path, path+"/labs/1/start", url.Values{}, ""); code != http.StatusServiceUnavailable || !strings.Contains(body, "请过几分钟再开始") {
		t.Errorf("start on a full host: %d\n%.300s", code, body)
	}
	e.host.mu.Lock()
	e.host.full = false
	e.host.mu.Unlock()
	code, body, h = e.postAs(e.a, path, path+"/labs/1/start", url.Values{}, "")
	if code != http.StatusSeeOther {
		t.Fatalf("start: %d\n%s", code, body)
	}
	labPath := h.Get("Location")
	e.c = e.a
	deadline := time.Now().Add(10 * time.Second)
	for {
		var st stateView
		_, body, _ := e.do(e.a, "GET", labPath+"/state", nil)
		_ = json.Unmarshal([]byte(body), &st)
		if st.Confirmed {
			if left := time.Until(st.Expires); left > 30*time.Minute || left < 29*time.Minute {
				t.Errorf("the lab runs %s, want the workshop's 30m", left)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lab not confirmed: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}

	d := e.dashboardNow(path)
	if len(d.Learners) != 2 || d.Opened != 1 || len(d.Labs) != 2 || !d.Labs[0].Open || d.Labs[1].Open {
		t.Fatalf("dashboard: %+v", d)
	}
	byID := map[int64]dashLearner{}
	for _, l := range d.Learners {
		byID[l.ID] = l
	}
	if la, lb := byID[e.ids[e.a]], byID[e.ids[e.b]]; la.Cells[0].State != "working" || la.Running != 0 || len(la.Nodes) != 4 || la.Idle < 0 ||
		lb.Cells[0].State != "notstarted" || lb.Running != -1 {
		t.Errorf("cells: a %+v, b %+v", la, lb)
	}

	// The learner types; the instructor's read-only view shows it, and nothing the
	// instructor sends reaches the shell.
	watch := fmt.Sprintf("%s/learners/%d/term/node1/ws", path, e.ids[e.a])
	e.wsAs(e.inst, watch, []byte("instructor-typed\r"))
	e.wsAs(e.a, labPath+"/term/node1/ws", []byte("learner-typed\r"))
	seen := strings.Join(e.wsAs(e.inst, watch, nil), "")
	if !strings.Contains(seen, "learner-typed") || strings.Contains(seen, "instructor-typed") {
		t.Errorf("the watched terminal shows %q", seen)
	}
	if code, _, _ := e.do(e.a, "GET", path+"/live/ws", nil); code != http.StatusNotFound {
		t.Errorf("a learner opened the dashboard: %d", code)
	}

	// An extra fault: only kinds the scenario uses, only into running labs.
	applied := len(e.mgr.All()[0].Injected())
	for _, tc := range []struct {
		form url.Values
		want int
	}{
		{url.Values{"learner": {"0"}, "kind": {"mtu"}, "node": {"node2"}}, http.StatusConflict},
		{url.Values{"learner": {fmt.Sprint(e.ids[e.b])}, "kind": {"loss"}, "node": {"node2"}}, http.StatusConflict},
		{url.Values{"learner": {fmt.Sprint(e.ids[e.a])}, "kind": {"loss"}, "node": {"node9"}}, http.StatusConflict},
		{url.Values{"learner": {fmt.Sprint(e.ids[e.a])}, "kind": {"loss"}, "node": {""}}, http.StatusBadRequest},
		{url.Values{"learner": {fmt.Sprint(e.ids[e.a])}, "kind": {"loss"}, "node": {"node3"}}, http.StatusOK},
	} {
		if code, body, _ := e.postAs(e.inst, path, path+"/inject", tc.form, "application/json"); code != tc.want {
			t.Errorf("inject %v: %d, want %d (%s)", tc.form, code, tc.want, body)
		}
	}
	l, _ := e.mgr.Current(e.ids[e.a])
	if got := l.Injected(); len(got) != applied+1 || !strings.HasPrefix(got[len(got)-1], "node3: inject loss") {
		t.Errorf("injected: %q", got)
	}
	if code, _, _ := e.postAs(e.inst, path, path+"/message", url.Values{"text": {"十分钟后讲解"}}, "application/json"); code != http.StatusOK {
		t.Errorf("message: %d", code)
	}

	// The learner's timeline says the lab changed and shows the message, never the kind.
	for _, c := range []*http.Client{e.a, e.b} {
		frames := e.wsAs(c, path+"/events/ws", nil)
		_, page, _ := e.do(c, "GET", path, nil)
		all := strings.Join(frames, "") + page
		if !strings.Contains(all, "十分钟后讲解") || strings.Contains(all, "loss") || strings.Contains(all, "node3: ") {
			t.Errorf("learner %d's timeline: %s", e.ids[c], frames)
		}
		if strings.Contains(all, "讲师调整了你的实验环境") != (c == e.a) {
			t.Errorf("learner %d: the fault event reached the wrong learner: %s", e.ids[c], frames)
		}
	}
	if d := e.dashboardNow(path); !strings.Contains(fmt.Sprint(d.Timeline), "loss · node3") {
		t.Errorf("the instructor's timeline lacks the fault: %+v", d.Timeline)
	}

	// A hint revealed to all opens, free, in every running lab of it and in each
	// one started later; the learner's live feed carries it to the lab page.
	if _, err := l.Hint(1); err != nil { // a paid for hint 2 before
		t.Fatal(err)
	}
	for _, tc := range []struct {
		form url.Values
		want int
		body string
	}{
		{url.Values{"lab": {"3"}, "n": {"1"}}, http.StatusBadRequest, "lab: a lab from 1 to 2"},
		{url.Values{"lab": {"1"}, "n": {"9"}}, http.StatusBadRequest, "n: lab 1 has hints 1 to 2"},
		{url.Values{"lab": {"1"}, "n": {"2"}}, http.StatusOK, `"given":1`},
	} {
		if code, body, _ := e.postAs(e.inst, path, path+"/hint", tc.form, "application/json"); code != tc.want || !strings.Contains(body, tc.body) {
			t.Errorf("hint %v: %d %s, want %d %q", tc.form, code, body, tc.want, tc.body)
		}
	}
	if used, open := l.HintsUsed(), l.HintsOpen(); len(used) != 0 || len(open) != 1 || open[0] != 1 {
		t.Errorf("after the reveal: used %v (paid), open %v", used, open)
	}
	var live learnerLive
	if frames := e.wsAs(e.a, path+"/events/ws", nil); len(frames) == 0 || json.Unmarshal([]byte(frames[0]), &live) != nil || live.Lab == nil ||
		live.Lab.ID != l.ID || len(live.Lab.Hints) != 1 || live.Lab.Hints[0].N != 2 || !strings.Contains(live.Lab.Hints[0].HTML, "丢包只出现在") {
		t.Errorf("a's live feed: %+v", live)
	}
	if _, page, _ := e.do(e.a, "GET", labPath, nil); !strings.Contains(page, fmt.Sprintf(`data-workshop="%s"`, strings.TrimPrefix(path, "/workshops/"))) ||
		!strings.Contains(page, "workshoplab.js") {
		t.Error("a's lab page has no live workshop feed")
	}

	// Extending moves the lab's end; the learner's timeline says by how much.
	before := l.Status().Expires
	for _, tc := range []struct {
		form url.Values
		want int
	}{
		{url.Values{"learner": {fmt.Sprint(e.ids[e.a])}, "minutes": {"0"}}, http.StatusBadRequest},
		{url.Values{"learner": {fmt.Sprint(e.ids[e.a])}, "minutes": {"241"}}, http.StatusBadRequest},
		{url.Values{"learner": {fmt.Sprint(e.ids[e.b])}, "minutes": {"15"}}, http.StatusConflict},
		{url.Values{"learner": {"0"}, "minutes": {"15"}}, http.StatusOK},
	} {
		if code, body, _ := e.postAs(e.inst, path, path+"/extend", tc.form, "application/json"); code != tc.want {
			t.Errorf("extend %v: %d, want %d (%s)", tc.form, code, tc.want, body)
		}
	}
	if got := l.Status().Expires.Sub(before); got != 15*time.Minute {
		t.Errorf("the lab's end moved by %s, want 15m", got)
	}
	if frames := e.wsAs(e.a, path+"/events/ws", nil); json.Unmarshal([]byte(frames[0]), &live) != nil || live.Lab == nil ||
		!live.Lab.Expires.Equal(before.Add(15*time.Minute)) || !strings.Contains(frames[0], "讲师延长了实验时间（分钟）: 15") {
		t.Errorf("a's live feed after the extension: %s", frames[0])
	}
	if frames := strings.Join(e.wsAs(e.b, path+"/events/ws", nil), ""); strings.Contains(frames, "延长") {
		t.Errorf("b, without a lab, was told of an extension: %s", frames)
	}

	// Reset ends one learner's running lab cleanly; they start it again.
	if code, _, _ := e.postAs(e.inst, path, path+"/reset", url.Values{"learner": {fmt.Sprint(e.ids[e.b])}}, "application/json"); code != http.StatusConflict {
		t.Errorf("reset a learner without a lab: %d", code)
	}
	if code, _, _ := e.postAs(e.a, path, path+"/reset", url.Values{"learner": {fmt.Sprint(e.ids[e.a])}}, "application/json"); code != http.StatusNotFound {
		t.Errorf("a learner reset a lab: %d", code)
	}
	reverts := e.host.reverts()
	if code, body, _ := e.postAs(e.inst, path, path+"/reset", url.Values{"learner": {fmt.Sprint(e.ids[e.a])}}, "application/json"); code != http.StatusOK {
		t.Fatalf("reset: %d %s", code, body)
	}
	select {
	case <-l.Ended():
	default:
		t.Fatal("reset answered before the lab ended")
	}
	if got := e.host.reverts() - reverts; got != len(l.Injected()) {
		t.Errorf("reset reverted %d faults of %d", got, len(l.Injected()))
	}
	for _, c := range []*http.Client{e.a, e.b} {
		frames := strings.Join(e.wsAs(c, path+"/events/ws", nil), "")
		if strings.Contains(frames, "讲师重置了你的实验") != (c == e.a) || !strings.Contains(frames, "讲师向所有人公开了提示") {
			t.Errorf("learner %d's timeline after the reset: %s", e.ids[c], frames)
		}
	}
	code, body, h = e.postAs(e.a, path, path+"/labs/1/start", url.Values{}, "")
	if code != http.StatusSeeOther {
		t.Fatalf("start again after the reset: %d\n%s", code, body)
	}
	l, _ = e.mgr.Current(e.ids[e.a])
	if used, open := l.HintsUsed(), l.HintsOpen(); len(used) != 0 || len(open) != 1 || open[0] != 1 {
		t.Errorf("the lab started after the reveal: used %v, open %v", used, open)
	}
	waitUp := time.Now().Add(10 * time.Second)
	for !l.Status().Confirmed && time.Now().Before(waitUp) {
		time.Sleep(10 * time.Millisecond)
	}

	// Ending stops every lab (its faults revert) and closes the workshop.
	if code, _, _ := e.postAs(e.inst, path, path+"/end", url.Values{}, "application/json"); code != http.StatusOK {
		t.Fatalf("end: %d", code)
	}
	select {
	case <-l.Ended():
	case <-time.After(10 * time.Second):
		t.Fatal("the lab still runs after the end")
	}
	for _, p := range []string{"/open", "/message"} {
		if code, _, _ := e.postAs(e.inst, path, path+p, url.Values{"n": {"2"}, "text": {"x"}}, "application/json"); code != http.StatusConflict {
			t.Errorf("%s after the end: %d", p, code)
		}
	}
	if d := e.dashboardNow(path); !d.Ended || d.Learners[0].Running != -1 {
		t.Errorf("after the end: %+v", d)
	}
}

// TestWorkshopExtendStarting: the instructor extends a lab still starting, whose
// nic-flap helper stops at the deadline it was started with: the extension is
// accepted and journaled, and once the lab is Ready its end has moved and the flap
// was applied again for the new end; so again when the lab is Ready.
func TestWorkshopExtendStarting(t *testing.T) {
	e := newWorkshopEnv(t)
	ctx := context.Background()
	w := &store.Workshop{InstructorID: e.ids[e.inst], Title: "t", Code: "FLAP", Labs: []string{"ch12-nic-flap-timeout"}, Opened: 1,
		LabTTL: 30 * time.Minute, StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour)}
	db := e.store.(store.Workshops)
	if err := db.CreateWorkshop(ctx, w); err != nil {
		t.Fatal(err)
	}
	if err := db.JoinWorkshop(ctx, w.ID, e.ids[e.a]); err != nil {
		t.Fatal(err)
	}
	path := fmt.Sprintf("/workshops/%d", w.ID)
	gate := make(chan struct{})
	e.host.mu.Lock()
	e.host.gate, e.host.fixed = gate, "nic-flap"
	e.host.mu.Unlock()
	if code, body, _ := e.postAs(e.a, path, path+"/labs/1/start", url.Values{}, ""); code != http.StatusSeeOther {
		t.Fatalf("start: %d\n%s", code, body)
	}
	l, _ := e.mgr.Current(e.ids[e.a])
	before := l.Status().Expires
	extend := func(moved time.Duration, reverts int) {
		t.Helper()
		form := url.Values{"learner": {fmt.Sprint(e.ids[e.a])}, "minutes": {"15"}}
		if code, body, _ := e.postAs(e.inst, path, path+"/extend", form, "application/json"); code != http.StatusOK || !strings.Contains(body, `"extended":1`) {
			t.Fatalf("extend a %s lab: %d %s", l.Status().State, code, body)
		}
		if got := l.Status().Expires.Sub(before); got != moved {
			t.Errorf("the end moved by %s, want %s", got, moved)
		}
		if got := e.host.reverts(); got != reverts {
			t.Errorf("%d faults reverted, want %d (the flap, to apply it again)", got, reverts)
		}
	}
	if st := l.Status().State; st != session.Starting {
		t.Fatalf("the lab is %s, want starting", st)
	}
	extend(0, 0) // owed until the lab is Ready
	close(gate)
	for deadline := time.Now().Add(10 * time.Second); !l.Status().Confirmed; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("lab not confirmed: %+v", l.Status())
		}
	}
	if got := l.Status().Expires.Sub(before); got != 15*time.Minute || e.host.reverts() != 1 {
		t.Errorf("once Ready: the end moved by %s, %d faults reverted; want 15m and the flap, applied again", got, e.host.reverts())
	}
	extend(30*time.Minute, 2)
	if frames := strings.Join(e.wsAs(e.a, path+"/events/ws", nil), ""); strings.Count(frames, "讲师延长了实验时间（分钟）: 15") != 2 {
		t.Errorf("a's timeline does not tell both extensions: %s", frames)
	}
	if _, page, _ := e.do(e.inst, "GET", path, nil); strings.Count(page, "讲师延长了实验时间（分钟）: 15 · 学员") != 2 {
		t.Errorf("the instructor's timeline does not say whose lab was extended:\n%s", page)
	}
}

// TestLiveHub: a change wakes every waiter of that workshop, and only them.
func TestLiveHub(t *testing.T) {
	h := newLiveHub()
	w1, w1b, w2 := h.wait(1), h.wait(1), h.wait(2)
	h.changed(1)
	for name, ch := range map[string]<-chan struct{}{"first": w1, "second": w1b} {
		select {
		case <-ch:
		default:
			t.Errorf("%s waiter of workshop 1 not woken", name)
		}
	}
	select {
	case <-w2:
		t.Error("workshop 2 woken by workshop 1's change")
	default:
	}
	h.changed(3) // nobody waits: no panic
}
