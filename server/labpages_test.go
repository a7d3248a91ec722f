package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/commlab/commlab/grader"
	"github.com/commlab/commlab/injector"
	"github.com/commlab/commlab/labs/netns"
	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/labs/topology"
	"github.com/commlab/commlab/scenarios"
	"github.com/commlab/commlab/web"
)

// The lab handlers run here on a real session.Manager whose host is a fake: what lies
// outside the server (namespaces, shells, the workload, the injector) is not tested
// here, so no root is needed.

type fakeHost struct {
	mu  sync.Mutex
	env [][]string // the environment of every workload run
	// gate, when set, holds every environment's start-up until it is closed.
	gate chan struct{}
	// queue, when set, is told to the lab while the gate holds it, as a Slurm
	// job waiting in the queue is.
	queue *session.Queue
	// full makes Check report that the host has no free sandbox slot.
	full bool
	// reverted counts the faults reverted.
	reverted int
	// fixed is a fault kind that cannot be renewed, as nic-flap's helper cannot.
	fixed string
	// probe is how long Check takes, as probing a real host does.
	probe time.Duration
}

func (h *fakeHost) reverts() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reverted
}

func (h *fakeHost) Up(ctx context.Context, env scenarios.Environment, ttl time.Duration, progress func(session.Progress)) (session.Env, error) {
	if h.gate != nil {
		if h.queue != nil {
			progress(session.Progress{Note: "pending", Queue: h.queue})
		}
		select {
		case <-h.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	nodes := []string{"node1"}
	if t, err := topology.Builtin(env.Topology); err == nil {
		nodes = t.NodeNames()
	}
	return &fakeEnv{h: h, nodes: nodes}, nil
}
func (h *fakeHost) Check(scenarios.Environment) error {
	time.Sleep(h.probe)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.full {
		return fmt.Errorf("%w: all 128 sandbox slots of this host are taken", netns.ErrBusy)
	}
	return nil
}
func (h *fakeHost) Apply(ctx context.Context, t injector.Target, kind string, params map[string]string, ttl time.Duration) (string, string, error) {
	var ps []string
	for k, v := range params {
		ps = append(ps, k+"="+v)
	}
	slices.Sort(ps)
	return "f-" + kind, "inject " + kind + " " + strings.Join(ps, " "), nil
}
func (h *fakeHost) Revert(ctx context.Context, id string) error {
	h.mu.Lock()
	h.reverted++
	h.mu.Unlock()
	return nil
}
func (h *fakeHost) Supports(ctx context.Context, kind string) error   { return nil }
func (e *fakeEnv) Renew(context.Context, string, time.Duration) error { return nil }
func (h *fakeHost) ChangesLogin(kind string) bool                     { return false }
func (e *fakeEnv) ID() string                                         { return "fake" }
func (e *fakeEnv) Nodes() []string                                    { return e.nodes }
func (e *fakeEnv) Target(string) injector.Target                      { return injector.Target{} }
func (e *fakeEnv) Down(context.Context) error                         { return nil }

func (h *fakeHost) Renew(_ context.Context, id string, _ time.Duration) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fixed != "" && id == "f-"+h.fixed {
		return injector.ErrFixedDeadline
	}
	return nil
}

func (e *fakeEnv) Shell(ctx context.Context, node, rc string) (session.PTY, error) {
	r, w := io.Pipe()
	return &echoPTY{r, w}, nil
}

type fakeEnv struct {
	h     *fakeHost
	nodes []string
	runs  int
}

// Workload measures 1 GB/s healthy, 0.1 with the fault (the second run), 1 after.
func (e *fakeEnv) Workload(ctx context.Context, w *scenarios.Workload, env []string, out io.Writer) (float64, error) {
	e.h.mu.Lock()
	defer e.h.mu.Unlock()
	e.h.env = append(e.h.env, env)
	e.runs++
	if e.runs == 2 {
		return 0.1, nil
	}
	return 1, nil
}

type echoPTY struct {
	r *io.PipeReader
	w *io.PipeWriter
}

func (p *echoPTY) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p *echoPTY) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p *echoPTY) Resize(uint16, uint16) error { return nil }
func (p *echoPTY) Close() error                { p.w.Close(); return p.r.Close() }

func catalog(t testing.TB) *scenarios.Catalog {
	t.Helper()
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
	return cat
}

type labEnv struct {
	*testEnv
	host *fakeHost
	mgr  *session.Manager
}

func newLabEnv(t *testing.T) *labEnv {
	t.Helper()
	srv, st := newTestServer(t, Config{})
	host := &fakeHost{}
	ctx, cancel := context.WithCancel(context.Background())
	mgr := session.NewManager(ctx, session.Config{Provider: host, Faults: host, DataDir: t.TempDir(), NoStream: true,
		Log: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { mgr.Shutdown(); cancel() })
	srv.cats, srv.labs = catalog(t), mgr
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return &labEnv{testEnv: &testEnv{t: t, url: hs.URL, store: st, c: newClient()}, host: host, mgr: mgr}
}

// startLab starts a scenario's lab as the env's learner and waits until scoring is
// confirmed; it returns the lab's page path.
func (e *labEnv) startLab(id string, form url.Values) string {
	e.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	form.Set("csrf_token", e.csrf(e.c, "/labs/"+id))
	code, body, h := e.do(e.c, "POST", "/labs/"+id+"/start", form)
	if code != http.StatusSeeOther {
		e.t.Fatalf("start %s: %d\n%s", id, code, body)
	}
	path := h.Get("Location")
	deadline := time.Now().Add(10 * time.Second)
	for {
		var st stateView
		_, body, _ := e.do(e.c, "GET", path+"/state", nil)
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			e.t.Fatalf("state: %v\n%s", err, body)
		}
		if st.Confirmed {
			return path
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("lab %s not confirmed: %+v", id, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *labEnv) post(path string, form url.Values, accept string) (int, string, http.Header) {
	e.t.Helper()
	form.Set("csrf_token", e.csrf(e.c, path[:strings.LastIndex(path, "/")]))
	req, _ := http.NewRequest("POST", e.url+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := e.c.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// ws reads a websocket's frames until it is quiet for a moment (or closed).
func (e *labEnv) ws(path string, send []byte) []string {
	e.t.Helper()
	u, _ := url.Parse(e.url)
	h := http.Header{"Origin": {e.url}}
	for _, c := range e.c.Jar.Cookies(u) {
		h.Add("Cookie", c.Name+"="+c.Value)
	}
	conn, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(e.url, "http")+path, h)
	if err != nil {
		e.t.Fatalf("dial %s: %v (%v)", path, err, resp)
	}
	defer conn.Close()
	if send != nil {
		_ = conn.WriteMessage(websocket.BinaryMessage, send)
	}
	var frames []string
	for {
		_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		_, p, err := conn.ReadMessage()
		if err != nil {
			return frames
		}
		frames = append(frames, string(p))
	}
}

// scenarioRef is a lab's own name in links (/labs/ch08-mtu-mismatch): the learner
// chose the lab by it, so it is no leak of the page.
var scenarioRef = regexp.MustCompile(`/labs/[a-z0-9-]+`)

var classSelect = regexp.MustCompile(`(?s)<select name="class".*?</select>`)

// leakTerms are what would name a variant's fault: each kind and every parameter value
// that is not a node or NIC name (those are listed in every lab) nor a bare number.
func leakTerms(v *scenarios.Variant, t *testing.T) []string {
	faults, err := v.Faults()
	if err != nil {
		t.Fatal(err)
	}
	plain := regexp.MustCompile(`^(node\d+|rdma\d+|eth\d+|lo|in|out|both|GPU\d+|\d+(\.\d+)?%?)$`)
	var terms []string
	for _, f := range faults {
		terms = append(terms, f.Kind)
		for _, val := range f.Params {
			// A value the task's author wrote into the task itself is meant to be read.
			if !plain.MatchString(val) && !strings.Contains(v.Scenario.Task, val) {
				terms = append(terms, val)
			}
		}
	}
	return terms
}

func leaks(where, text string, terms []string) []string {
	var out []string
	text = scenarioRef.ReplaceAllString(text, "")
	for _, term := range terms {
		if strings.Contains(text, term) {
			i := strings.Index(text, term)
			out = append(out, fmt.Sprintf("%s names %q: …%s…", where, term, text[max(0, i-60):min(len(text), i+len(term)+60)]))
		}
	}
	return out
}

// TestLabPayloadsNameNoFault starts, for every fault kind the catalog uses, a lab that
// injects it, and reads everything the lab page receives before the debrief (the page,
// its JSON, the chart's and a terminal's websocket frames, a check's result, a wrong
// final answer's page, the workload's environment): none may name the fault. After
// giving up, the page does show it (so the test can see it when it is there).
func TestLabPayloadsNameNoFault(t *testing.T) {
	e := newLabEnv(t)
	e.register(e.c, "audit@example.com")
	seen := map[string]bool{}
	for _, sc := range catalog(t).All() {
		fresh := false
		for _, f := range sc.Faults {
			fresh = fresh || !seen[f.Kind]
			seen[f.Kind] = true
		}
		if !fresh {
			continue
		}
		t.Run(sc.ID, func(t *testing.T) {
			e.t = t
			path := e.startLab(sc.ID, nil)
			lab, err := e.mgr.Get(1, path[len("/lab/"):])
			if err != nil {
				t.Fatal(err)
			}
			terms := leakTerms(lab.Variant, t)
			var found []string
			_, html, _ := e.do(e.c, "GET", path, nil)
			found = append(found, leaks("page", classSelect.ReplaceAllString(html, ""), terms)...)
			for _, p := range []string{"/state", "/commands"} {
				_, body, _ := e.do(e.c, "GET", path+p, nil)
				found = append(found, leaks(p, body, terms)...)
			}
			chart := e.ws(path+"/metrics/ws", nil)
			if len(chart) == 0 || !strings.Contains(strings.Join(chart, ""), `"label":"`+session.FaultEvent+`"`) {
				t.Errorf("the chart does not mark the fault's moment: %q", chart)
			}
			found = append(found, leaks("chart frames", strings.Join(chart, "\n"), terms)...)
			node := lab.Status().Nodes[0]
			found = append(found, leaks("terminal frames", strings.Join(e.ws(path+"/term/"+node+"/ws", []byte("ps -eo args\n")), ""), terms)...)
			e.host.mu.Lock()
			for _, env := range e.host.env {
				found = append(found, leaks("workload env", strings.Join(env, "\n"), terms)...)
			}
			e.host.env = nil
			e.host.mu.Unlock()

			wrong := url.Values{"class": {"cpu-starvation"}, "node": {"node9"}}
			code, check, _ := e.post(path+"/check", wrong, "application/json")
			if code != http.StatusOK || !strings.Contains(check, `"final":false`) {
				t.Fatalf("check: %d %s", code, check)
			}
			found = append(found, leaks("check", check, terms)...)
			if code, body, _ := e.post(path+"/submit", wrong, ""); code != http.StatusSeeOther {
				t.Fatalf("submit: %d %s", code, body)
			}
			_, html, _ = e.do(e.c, "GET", path, nil)
			found = append(found, leaks("page after a wrong answer", classSelect.ReplaceAllString(html, ""), terms)...)
			if !strings.Contains(html, `data-passed="false"`) || !strings.Contains(html, `id="give-up"`) {
				t.Errorf("a wrong answer's page has no result or no give-up button")
			}
			for _, f := range found {
				t.Error(f)
			}
			if code, body, _ := e.post(path+"/giveup", url.Values{}, ""); code != http.StatusSeeOther {
				t.Fatalf("give up: %d %s", code, body)
			}
			_, html, _ = e.do(e.c, "GET", path, nil)
			if inj := lab.Injected(); len(inj) == 0 || !strings.Contains(html, strings.SplitN(inj[0], ": ", 2)[1]) {
				t.Errorf("after giving up the page does not show what was injected (%q)", inj)
			}
		})
	}
	if len(seen) < 5 {
		t.Fatalf("only %d fault kinds in the catalog", len(seen))
	}
}

// Every text the lab code sends by key exists in both UI languages.
func TestLabKeysTranslated(t *testing.T) {
	keys := append(grader.DetailKeys(), session.StepUp, session.StepShells, session.StepBaseline, session.StepInject,
		session.StepSelfTest, session.StepUntuned, session.StepReady, "crit.class", "crit.location", "crit.evidence", "crit.remediation",
		"crit.hints", "crit.checks", "crit.estimates", "lab.estimates", "lab.fault.event", "err.nochecks", "err.grade",
		"lab.rulesfirst", "lab.intro.rules")
	for _, k := range keys {
		zh, en := web.T("zh", k), web.T("en", k)
		if zh == k || en == zh {
			t.Errorf("%s: zh %q, en %q", k, zh, en)
		}
		if strings.Count(zh, "%") != strings.Count(en, "%") {
			t.Errorf("%s: the languages take different arguments: %q, %q", k, zh, en)
		}
	}
}

// TestLabPages: the intro page describes the lab; the lab page asks only for the
// location fields its diagnosis has; a hint opens without leaving the page; the
// banner names the running lab and goes with Stop; "try again" keeps the variant.
func TestLabPages(t *testing.T) {
	e := newLabEnv(t)
	e.register(e.c, "pages@example.com")
	_, intro, _ := e.do(e.c, "GET", "/labs/ch08-link-loss", nil)
	for _, want := range []string{"任务概要", "4 台节点", "rdma0 (data)", "45 分钟", "会发生什么", `id="start-lab"`} {
		if !strings.Contains(intro, want) {
			t.Errorf("intro page lacks %q", want)
		}
	}
	if strings.Contains(intro, "${") {
		t.Error("intro page shows a raw ${param}")
	}
	// An alerting lab grades the learner's rules, not a re-measured fix.
	_, rules, _ := e.do(e.c, "GET", "/labs/ch26-alert-rules", nil)
	if !strings.Contains(rules, web.T("zh", "lab.intro.rules")) || strings.Contains(rules, web.T("zh", "lab.intro.fix")) {
		t.Error("the alerting lab's intro does not say its rules are graded")
	}

	path := e.startLab("ch08-link-loss", nil)
	_, page, _ := e.do(e.c, "GET", path, nil)
	for field, want := range map[string]bool{"node": true, "nic": true, "gpu": false, "port": false} {
		if got := strings.Contains(page, `name="`+field+`"`); got != want {
			t.Errorf("location field %s shown: %v, want %v", field, got, want)
		}
	}
	code, hint, _ := e.post(path+"/hint/1", url.Values{}, "application/json")
	if code != http.StatusOK || !strings.Contains(hint, `"html"`) {
		t.Errorf("hint: %d %s", code, hint)
	}
	if code, _, h := e.post(path+"/hint/1", url.Values{}, ""); code != http.StatusSeeOther || !strings.HasSuffix(h.Get("Location"), "#hints") {
		t.Errorf("hint without script: %d %s", code, h.Get("Location"))
	}

	_, other, _ := e.do(e.c, "GET", "/labs/ch08-mtu-mismatch", nil)
	if !strings.Contains(other, `id="running-lab"`) || !strings.Contains(other, "链路随机丢包") || strings.Contains(other, `id="start-lab"`) {
		t.Error("another lab's intro does not name the running lab")
	}
	lab, _ := e.mgr.Get(1, path[len("/lab/"):])
	if code, _, _ := e.post(path+"/stop", url.Values{}, ""); code != http.StatusSeeOther {
		t.Fatalf("stop: %d", code)
	}
	_, other, _ = e.do(e.c, "GET", "/labs/ch08-mtu-mismatch", nil)
	if strings.Contains(other, `id="running-lab"`) || !strings.Contains(other, `id="start-lab"`) {
		t.Error("the banner stays after Stop")
	}

	again := e.startLab("ch08-link-loss", url.Values{"again": {lab.ID}})
	l2, _ := e.mgr.Get(1, again[len("/lab/"):])
	if l2 == nil || l2.ID == lab.ID || l2.Variant.Seed != lab.Variant.Seed {
		t.Errorf("try again: %v", l2)
	}
}
