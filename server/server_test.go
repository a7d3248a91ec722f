package server

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/commlab/commlab/course"
	"github.com/commlab/commlab/server/store"
)

var fixture = fstest.MapFS{
	"course.yaml": {Data: []byte(`title: 测试课程
modules:
  - id: 1
    title: 基础篇
    summary: s
    chapters:
      - {id: ch01, title: 第一章}
      - {id: ch02, title: 第二章}
`)},
	"chapters/ch01.md": {Data: []byte("---\nid: ch01\ntitle: 第一章\nmodule: 1\norder: 1\nlabs: []\nquiz: ch01.yaml\n---\n## 小节\n\n| a | b |\n|---|---|\n| 1 | 2 |\n")},
	"quizzes/ch01.yaml": {Data: []byte(`pass: 0.5
questions:
  - {id: q1, type: single, prompt: "p", options: ["x", "y"], answer: 1, explanation: "因为 y"}
  - {id: q2, type: numeric, prompt: "n", answer: 175, tolerance: 0.01, explanation: "175"}
`)},
}

type testEnv struct {
	t     *testing.T
	url   string
	store store.Store
	c     *http.Client
}

func newTestServer(tb testing.TB, cfg Config) (*Server, store.Store) {
	tb.Helper()
	st, err := store.OpenSQLite(context.Background(), filepath.Join(tb.TempDir(), "commlab.db"))
	if err != nil {
		tb.Fatal(err)
	}
	return newTestServerOn(tb, cfg, st), st
}

// newTestServerOn is newTestServer on a store the test opened; it closes it.
func newTestServerOn(tb testing.TB, cfg Config, st store.Store) *Server {
	tb.Helper()
	lib, err := course.NewLibrary(fixture, course.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	srv, err := New(cfg, Deps{Library: lib, Store: st, Secret: []byte("0123456789abcdef0123456789abcdef"), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	return srv
}

func newTestEnv(t *testing.T, cfg Config) *testEnv {
	t.Helper()
	srv, st := newTestServer(t, cfg)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return &testEnv{t: t, url: hs.URL, store: st, c: newClient()}
}

func newClient() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (e *testEnv) do(c *http.Client, method, path string, form url.Values) (int, string, http.Header) {
	e.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, e.url+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

var csrfRe = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)

// csrf fetches a page and returns the CSRF token of its first form.
func (e *testEnv) csrf(c *http.Client, path string) string {
	e.t.Helper()
	_, body, _ := e.do(c, "GET", path, nil)
	m := csrfRe.FindStringSubmatch(body)
	if m == nil {
		e.t.Fatalf("no csrf token on %s", path)
	}
	return m[1]
}

func (e *testEnv) register(c *http.Client, email string) {
	e.t.Helper()
	tok := e.csrf(c, "/register")
	code, body, _ := e.do(c, "POST", "/register", url.Values{"csrf_token": {tok}, "email": {email}, "name": {"学员"}, "password": {"correct horse battery"}})
	if code != http.StatusSeeOther {
		e.t.Fatalf("register %s: %d\n%s", email, code, body)
	}
}

func TestPages(t *testing.T) {
	e := newTestEnv(t, Config{})
	tests := []struct {
		path     string
		want     int
		contains []string
	}{
		{"/course", 200, []string{"测试课程", `href="/course/ch01"`, "编写中"}},
		{"/course/ch01", 200, []string{"<h1>第一章</h1>", `<h2 id="小节">`, "<table>", "本章目录", "本章测验"}},
		{"/course/ch02", 404, []string{"编写中"}},
		{"/course/nope", 404, []string{"没有这个页面"}},
		{"/no/such/page", 404, []string{"没有这个页面"}},
		{"/healthz", 200, []string{`"status":"ok"`}},
		{"/static/app.css", 200, []string{"--accent"}},
		{"/static/", 404, []string{"没有这个页面"}},
		{"/static/dist/", 404, []string{"没有这个页面"}},
		{"/static-gen/highlight.css", 200, []string{".chroma"}},
		{"/progress", 302, nil},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			code, body, h := e.do(newClient(), "GET", tt.path, nil)
			if code != tt.want {
				t.Fatalf("status %d, want %d\n%s", code, tt.want, body)
			}
			for _, s := range tt.contains {
				if !strings.Contains(body, s) {
					t.Errorf("body lacks %q", s)
				}
			}
			if h.Get("X-Frame-Options") != "DENY" || !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'self'") {
				t.Errorf("security headers missing: %v", h)
			}
		})
	}
}

func TestAccountAndProgress(t *testing.T) {
	e := newTestEnv(t, Config{})
	alice := newClient()
	e.register(alice, "Alice@Example.com")
	u, err := e.store.UserByEmail(context.Background(), "alice@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if u.Role != store.RoleAdmin {
		t.Errorf("first account role = %s, want admin", u.Role)
	}
	bob := newClient()
	e.register(bob, "bob@example.com")
	if u, _ := e.store.UserByEmail(context.Background(), "bob@example.com"); u.Role != store.RoleLearner {
		t.Errorf("second account role = %s, want learner", u.Role)
	}

	// Same email again is refused with a message, not a 500.
	tok := e.csrf(newClient(), "/register")
	_ = tok
	c3 := newClient()
	tok = e.csrf(c3, "/register")
	code, body, _ := e.do(c3, "POST", "/register", url.Values{"csrf_token": {tok}, "email": {"alice@example.com"}, "name": {"x"}, "password": {"correct horse battery"}})
	if code != http.StatusConflict || !strings.Contains(body, "已经注册") {
		t.Errorf("duplicate register: %d", code)
	}

	// Mark read, then the index shows the mark.
	tok = e.csrf(alice, "/course/ch01")
	if code, _, _ := e.do(alice, "POST", "/course/ch01/read", url.Values{"csrf_token": {tok}}); code != http.StatusSeeOther {
		t.Fatalf("mark read: %d", code)
	}
	_, body, _ = e.do(alice, "GET", "/course", nil)
	if !strings.Contains(body, `class="badge read"`) {
		t.Error("index lacks the read mark after marking ch01 read")
	}

	// Quiz: one right, one wrong -> 50 % -> passes at 0.5; the post redirects to
	// the result page, which shows the explanations and can be reloaded.
	code, _, hdr := e.do(alice, "POST", "/course/ch01/quiz", url.Values{"csrf_token": {tok}, "q.q1": {"1"}, "q.q2": {"100"}})
	if code != http.StatusSeeOther || hdr.Get("Location") != "/course/ch01/quiz" {
		t.Fatalf("quiz: %d, Location %q; want 303 to /course/ch01/quiz", code, hdr.Get("Location"))
	}
	code, body, _ = e.do(alice, "GET", "/course/ch01/quiz", nil)
	if code != 200 || !strings.Contains(body, "因为 y") || !strings.Contains(body, "50%") {
		t.Fatalf("quiz result: %d\n%s", code, body)
	}
	prog, err := e.store.Progress(context.Background(), u.ID)
	if err != nil {
		t.Fatal(err)
	}
	if p := prog["ch01"]; !p.Read || !p.QuizPassed || p.QuizScore != 0.5 {
		t.Errorf("progress = %+v", p)
	}
	if code, body, _ := e.do(alice, "GET", "/progress", nil); code != 200 || !strings.Contains(body, "已学 1 / 1 章") {
		t.Errorf("progress page: %d", code)
	}

	// Logout ends the session.
	tok = e.csrf(alice, "/course/ch01")
	e.do(alice, "POST", "/logout", url.Values{"csrf_token": {tok}})
	if code, _, _ := e.do(alice, "GET", "/progress", nil); code != http.StatusFound {
		t.Errorf("after logout /progress = %d, want redirect to login", code)
	}
}

func TestLogin(t *testing.T) {
	e := newTestEnv(t, Config{LoginBurst: 4, LoginRate: 0.001})
	e.register(newClient(), "carol@example.com") // attempt 1
	c := newClient()
	tok := e.csrf(c, "/login")
	code, body, _ := e.do(c, "POST", "/login", url.Values{"csrf_token": {tok}, "email": {"carol@example.com"}, "password": {"wrong password!"}})
	if code != http.StatusUnauthorized || !strings.Contains(body, "邮箱或密码不正确") {
		t.Errorf("wrong password: %d", code)
	}
	code, _, h := e.do(c, "POST", "/login", url.Values{"csrf_token": {tok}, "email": {"CAROL@example.com"}, "password": {"correct horse battery"}, "next": {"/course/ch01"}})
	if code != http.StatusSeeOther || h.Get("Location") != "/course/ch01" {
		t.Errorf("login: %d %s", code, h.Get("Location"))
	}
	// Logged in, the forms send the learner on instead of showing themselves.
	for _, tt := range []struct{ path, want string }{{"/login", "/course"}, {"/register", "/course"}, {"/login?next=/progress", "/progress"}} {
		if code, _, h := e.do(c, "GET", tt.path, nil); code != http.StatusFound || h.Get("Location") != tt.want {
			t.Errorf("logged in, GET %s: %d to %q; want 302 to %s", tt.path, code, h.Get("Location"), tt.want)
		}
	}
	// Attempts 4 and 5: the burst of 4 is spent, the limiter answers 429 with Retry-After.
	tok = e.csrf(c, "/course/ch01") // the token is now bound to the new session
	e.do(c, "POST", "/login", url.Values{"csrf_token": {tok}, "email": {"x@example.com"}, "password": {"whatever123"}})
	code, _, h = e.do(c, "POST", "/login", url.Values{"csrf_token": {tok}, "email": {"x@example.com"}, "password": {"whatever123"}})
	if code != http.StatusTooManyRequests || h.Get("Retry-After") == "" {
		t.Errorf("rate limit: %d, Retry-After %q", code, h.Get("Retry-After"))
	}
}

func TestBadRequests(t *testing.T) {
	e := newTestEnv(t, Config{MaxFormBytes: 1024})
	c := newClient()
	tok := e.csrf(c, "/register")
	tests := []struct {
		name string
		body string
		want int
		msg  string
	}{
		{"no csrf token", "email=a%40b.c", 403, "CSRF"},
		{"wrong csrf token", "csrf_token=forged&email=a%40b.c", 403, "CSRF"},
		{"oversized", "csrf_token=" + tok + "&name=" + strings.Repeat("x", 4096), 413, "太大"},
		{"malformed", "csrf_token=" + tok + "&email=%zz", 400, "表单格式不正确"},
		{"invalid email", "csrf_token=" + tok + "&email=not-an-email&name=n&password=correct+horse+battery", 400, ""},
		{"short password", "csrf_token=" + tok + "&email=d%40example.com&name=n&password=short", 400, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", e.url+"/register", strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want || !strings.Contains(string(b), tt.msg) {
				t.Errorf("status %d, want %d with %q\n%s", resp.StatusCode, tt.want, tt.msg, b)
			}
		})
	}
	// A forged cross-site post from a logged-in browser is refused too.
	e.register(c, "eve@example.com")
	if code, _, _ := e.do(c, "POST", "/course/ch01/read", url.Values{}); code != http.StatusForbidden {
		t.Errorf("mark read without token = %d, want 403", code)
	}
	// Redirect targets stay on this site.
	if _, _, h := e.do(c, "GET", "/lang/en?next=//evil.example/x", nil); h.Get("Location") != "/course" {
		t.Errorf("open redirect: Location %q", h.Get("Location"))
	}
}

func TestMetrics(t *testing.T) {
	e := newTestEnv(t, Config{MetricsToken: "scrape-me-0123456789"})
	admin, learner := newClient(), newClient()
	e.register(admin, "admin@example.com") // the first account administers
	e.register(learner, "learner@example.com")
	e.do(newClient(), "GET", "/course", nil)
	bearer := func(tok string) *http.Client {
		return &http.Client{Transport: headerRT{"Authorization", "Bearer " + tok}}
	}
	for _, tc := range []struct {
		who  string
		c    *http.Client
		want int
	}{
		{"anonymous", newClient(), 404},
		{"learner", learner, 404},
		{"wrong token", bearer("scrape-me-0123456788"), 404},
		{"admin", admin, 200},
		{"token", bearer("scrape-me-0123456789"), 200},
	} {
		code, body, _ := e.do(tc.c, "GET", "/metrics", nil)
		if code != tc.want {
			t.Errorf("/metrics as %s: %d, want %d", tc.who, code, tc.want)
		}
		if code == 200 && !strings.Contains(body, `commlab_http_requests_total{code="200",method="GET",route="/course"} 1`) {
			t.Errorf("metrics lack the /course request:\n%s", body)
		}
	}
}

type headerRT struct{ k, v string }

func (h headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.k, h.v)
	return http.DefaultTransport.RoundTrip(r)
}

func TestNoDirectoryListing(t *testing.T) {
	e := newTestEnv(t, Config{})
	for _, p := range []string{"/static/", "/static", "/course/assets/", "/course/assets/chapters/"} {
		code, body, _ := e.do(newClient(), "GET", p, nil)
		if code == 200 || strings.Contains(body, "<pre>") {
			t.Errorf("GET %s: %d, lists a directory?\n%.300s", p, code, body)
		}
	}
	if code, _, _ := e.do(newClient(), "GET", "/static/app.css", nil); code != 200 {
		t.Errorf("GET /static/app.css: %d", code)
	}
}

func TestEnglish(t *testing.T) {
	e := newTestEnv(t, Config{})
	c := newClient()
	e.do(c, "GET", "/lang/en?next=/course", nil)
	_, body, _ := e.do(c, "GET", "/course", nil)
	if !strings.Contains(body, "not yet written") || !strings.Contains(body, `lang="en"`) {
		t.Error("English UI not applied")
	}
}

// forwardedFor sends every request as if through a proxy for client ip.
type forwardedFor string

func (ip forwardedFor) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Forwarded-For", string(ip))
	return http.DefaultTransport.RoundTrip(r)
}

// TestTrustedProxies: behind a trusted proxy the login rate limit counts each client
// it forwards for; from anywhere else X-Forwarded-For is ignored, so a client cannot
// dodge the limit by sending one.
func TestTrustedProxies(t *testing.T) {
	for _, tt := range []struct {
		name    string
		trusted []string
		// secondLimited: the second client, after the first spent the burst.
		secondLimited bool
	}{
		{"behind the proxy", []string{"127.0.0.1"}, false},
		{"no proxy trusted", nil, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newTestEnv(t, Config{LoginBurst: 1, LoginRate: 0.001, TrustedProxies: tt.trusted})
			login := func(ip string) int {
				c := newClient()
				c.Transport = forwardedFor(ip)
				tok := e.csrf(c, "/login")
				code, _, _ := e.do(c, "POST", "/login", url.Values{"csrf_token": {tok}, "email": {"x@example.com"}, "password": {"whatever123"}})
				return code
			}
			if code := login("198.51.100.1"); code == http.StatusTooManyRequests {
				t.Fatalf("first attempt: %d", code)
			}
			if code := login("198.51.100.1"); code != http.StatusTooManyRequests {
				t.Errorf("the same client again: %d, want 429", code)
			}
			if limited := login("198.51.100.2") == http.StatusTooManyRequests; limited != tt.secondLimited {
				t.Errorf("another client: limited %v, want %v", limited, tt.secondLimited)
			}
		})
	}
	lib, err := course.NewLibrary(fixture, course.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "commlab.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	d := Deps{Library: lib, Store: st, Secret: []byte("0123456789abcdef0123456789abcdef"), Log: slog.New(slog.DiscardHandler)}
	if _, err := New(Config{TrustedProxies: []string{"not-an-address"}}, d); err == nil || !strings.Contains(err.Error(), "not-an-address") {
		t.Errorf("a bad proxy address: %v", err)
	}
}
