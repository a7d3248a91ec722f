package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/commlab/commlab/internal/pgtest"
	"github.com/commlab/commlab/internal/testenv"
	"github.com/commlab/commlab/server/store"
	"github.com/commlab/commlab/web"
)

// TestTwoReplicasBehindNginx runs the README's two-replica setup for real: two
// `commlab serve` processes on one PostgreSQL database, nginx from Debian
// round-robin in front. A learner works a lab through nginx whichever replica
// serves each request; stopping the replica that does not run the lab loses
// neither the lab nor the answer, and the replica that runs it, stopped with a
// drain, serves the lab until it is answered.
func TestTwoReplicasBehindNginx(t *testing.T) {
	testenv.RequireRoot(t, "lab sandboxes")
	nginx := nginxBinary(t)
	pg := pgtest.Start(t)
	dbURL := pg.URL(pg.NewDB(t))
	bin := testenv.Commlab(t)

	// The first replica makes the keys; the second starts with copies (README).
	a := startReplica(t, bin, dbURL, t.TempDir())
	b := startReplica(t, bin, dbURL, copyKeys(t, a.data))
	front := startNginx(t, nginx, a.addr, b.addr)

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	st, err := store.OpenPostgres(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	newLearner(t, front).account("/register", "replica-learner@example.com")
	l := newLearner(t, front) // another browser: logs in through nginx
	l.account("/login", "replica-learner@example.com")
	lab := l.startLab("ch01-tour")
	id := strings.TrimPrefix(lab, "/lab/")
	o, err := st.LabOwner(ctx, id)
	if err != nil {
		t.Fatalf("owner of %s: %v", id, err)
	}
	owner, other := a, b
	if o.Replica == "http://"+b.addr {
		owner, other = b, a
	} else if o.Replica != "http://"+a.addr {
		t.Fatalf("owner of %s is %q, neither replica", id, o.Replica)
	}
	t.Logf("lab %s runs on %s (sandbox %s)", id, o.Replica, l.waitConfirmed(lab).Sandbox)

	// Round robin sends consecutive requests to alternate replicas: two
	// terminals through nginx are one through each. Each replica directly too.
	for i, base := range []string{front, front, "http://" + a.addr, "http://" + b.addr} {
		l.terminal(base, lab, fmt.Sprintf("echo replica-%d-$((6*7))", i), fmt.Sprintf("replica-%d-42", i))
	}

	// The other replica stops; the lab and its terminal carry on through nginx.
	other.stop(t)
	for range 4 { // nginx finds the stopped one out and keeps to the owner
		if st := l.state(lab); st.State != "ready" {
			t.Fatalf("lab after the other replica stopped: %+v", st)
		}
	}
	l.terminal(front, lab, "echo after-stop-$((6*7))", "after-stop-42")

	// An answer through nginx is graded by the owner and stored.
	code, body, _ := l.post(lab, lab+"/submit", url.Values{"class": {"nic-rate-limited"}, "node": {"node1"}, "nic": {"rdma0"}})
	if code != http.StatusSeeOther {
		t.Fatalf("submit: %d\n%.500s", code, body)
	}
	u, err := st.UserByEmail(ctx, "replica-learner@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if p, err := st.Progress(ctx, u.ID); err != nil || p["ch01"].Labs["ch01-tour"].Attempts != 1 {
		t.Errorf("progress after submit = %+v, %v; want one attempt at ch01-tour", p["ch01"], err)
	}
	if code, body, _ := l.get(lab); code != http.StatusOK || !strings.Contains(body, `id="result"`) {
		t.Errorf("lab page after submit: %d, want 200 with the result\n%.300s", code, body)
	}

	// The graded lab ends (its teardown done, the end recorded). A new one runs
	// when its replica drains (SIGTERM with --drain): no lab starts there any
	// more, its learner is told at the terminal, and the lab carries on through
	// nginx until it is answered; then the replica exits, and the sandbox with it.
	waitEnded(t, ctx, st, id)
	again := l.startLab("ch01-tour")
	sandbox := l.waitConfirmed(again).Sandbox
	if err := owner.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	refused := func() bool { // busy (409) until the drain begins, then draining (503)
		code, body, _ := l.post("/labs/ch01-tour", "/labs/ch01-tour/start", url.Values{})
		if code != http.StatusConflict && (code != http.StatusServiceUnavailable || !strings.Contains(body, web.T("zh", "err.draining"))) {
			t.Fatalf("a start while the owner drains: %d, want 409 or 503 with %q\n%.300s", code, web.T("zh", "err.draining"), body)
		}
		return code == http.StatusServiceUnavailable
	}
	for deadline := time.Now().Add(30 * time.Second); !refused(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the owner does not drain 30 s after SIGTERM")
		}
	}
	if n := l.terminalNotice(front, again); !strings.Contains(n, `"type":"notice"`) || !strings.Contains(n, web.T("zh", "lab.draining")) {
		t.Errorf("the terminal of the draining owner says %q, want the drain notice", n)
	}
	if st := l.state(again); st.State != "ready" {
		t.Fatalf("lab while its replica drains: %+v", st)
	}
	l.terminal(front, again, "echo draining-$((6*7))", "draining-42")
	if code, body, _ := l.post(again, again+"/submit", url.Values{"class": {"nic-rate-limited"}, "node": {"node1"}, "nic": {"rdma0"}}); code != http.StatusSeeOther {
		t.Fatalf("submit while the owner drains: %d\n%.500s", code, body)
	}
	if err := owner.exited(2 * time.Minute); err != nil {
		t.Fatalf("the drained owner: %v", err)
	}
	if out, _ := exec.Command("ip", "netns", "list").Output(); sandbox == "" || strings.Contains(string(out), "cl-"+sandbox+"-") {
		t.Errorf("sandbox %q of the lab remains after its replica stopped:\n%s", sandbox, out)
	}
	if o, err := st.LabOwner(ctx, strings.TrimPrefix(again, "/lab/")); err != nil || o.EndedAt.IsZero() {
		t.Errorf("owner of %s after its replica stopped: %+v, %v; want it ended", again, o, err)
	}
	if p, err := st.Progress(ctx, u.ID); err != nil || p["ch01"].Labs["ch01-tour"].Attempts != 2 {
		t.Errorf("progress after the second submit = %+v, %v; want two attempts at ch01-tour", p["ch01"], err)
	}
}

// waitEnded waits until the store records lab id's end.
func waitEnded(t *testing.T, ctx context.Context, st store.LabOwners, id string) {
	t.Helper()
	for {
		o, err := st.LabOwner(ctx, id)
		if err == nil && !o.EndedAt.IsZero() {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("end of lab %s not recorded: %+v, %v", id, o, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func nginxBinary(t *testing.T) string {
	for _, p := range []string{"nginx", "/usr/sbin/nginx"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("COMMLAB_REQUIRE_NGINX") == "1" {
		t.Fatal("nginx is required (COMMLAB_REQUIRE_NGINX=1): apt-get install nginx-light")
	}
	t.Skip("needs nginx (Debian: apt-get install nginx-light)")
	return ""
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

type serveProc struct {
	addr, data string
	cmd        *exec.Cmd
	log        string
	done       chan struct{} // closed when the process has exited, with err
	err        error
}

// startReplica starts `commlab serve --advertise --drain` on data and waits
// for /healthz.
func startReplica(t *testing.T, bin, dbURL, data string) *serveProc {
	t.Helper()
	p := &serveProc{addr: freeAddr(t), data: data, log: filepath.Join(data, "serve.log"), done: make(chan struct{})}
	logf, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	p.cmd = exec.Command(bin, "--data", data, "--store", dbURL, "--log-level", "warn",
		"serve", "--addr", p.addr, "--advertise", "http://"+p.addr, "--drain", "10m")
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			b, _ := os.ReadFile(p.log)
			t.Logf("replica %s log:\n%s", p.addr, b)
		}
	})
	waitHTTP(t, "http://"+p.addr+"/healthz")
	return p
}

// exited waits up to d for the replica to exit and says how it went.
func (p *serveProc) exited(d time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		return fmt.Errorf("replica %s still runs after %s", p.addr, d)
	}
}

// stop ends the replica as systemd would (SIGTERM: it drains), and again every
// 2 s until it exits (a second signal stops it at once), within 60 s.
func (p *serveProc) stop(t *testing.T) {
	for range 30 {
		_ = p.cmd.Process.Signal(syscall.SIGTERM) // fails, harmlessly, once it has exited
		select {
		case <-p.done:
			if p.err != nil {
				t.Errorf("replica %s exited: %v", p.addr, p.err)
			}
			return
		case <-time.After(2 * time.Second):
		}
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	t.Errorf("replica %s did not stop within 60 s of SIGTERM", p.addr)
}

// waitHTTP waits until url answers 200.
func waitHTTP(t *testing.T, url string) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
	}
	t.Fatalf("%s did not answer 200 within 60 s", url)
}

// copyKeys gives a new data directory the keys of from's.
func copyKeys(t *testing.T, from string) string {
	to := t.TempDir()
	for _, k := range []string{"secret.key", "cert.key"} {
		b, err := os.ReadFile(filepath.Join(from, k))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, k), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

// nginxConf is the README's snippet in a whole configuration: round robin over
// the replicas, websockets upgraded, the Host kept (replicas check a
// websocket's Origin against it).
const nginxConf = `daemon off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 256; }
http {
    access_log %[1]s/access.log;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    map $http_upgrade $connection_upgrade { default upgrade; '' close; }
    # A replica that failed once stays out for the rest of the test: nginx
    # retries a GET on the other, never a POST.
    upstream commlab {
        server %[2]s max_fails=1 fail_timeout=5m;
        server %[3]s max_fails=1 fail_timeout=5m;
    }
    server {
        listen %[4]s;
        location / {
            proxy_pass http://commlab;
            proxy_http_version 1.1;
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_read_timeout 1h;
        }
    }
}
`

// startNginx serves replicas a and b round-robin on a loopback port and
// returns its URL.
func startNginx(t *testing.T, nginx, a, b string) string {
	t.Helper()
	dir := t.TempDir()
	addr := freeAddr(t)
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, nginxConf, dir, a, b, addr), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(nginx, "-p", dir, "-c", conf)
	out, err := os.Create(filepath.Join(dir, "nginx.out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGQUIT) // nginx's graceful stop
		_ = cmd.Wait()
		if t.Failed() {
			for _, f := range []string{"nginx.out", "error.log", "access.log"} {
				b, _ := os.ReadFile(filepath.Join(dir, f))
				t.Logf("nginx %s:\n%s", f, b)
			}
		}
	})
	base := "http://" + addr
	waitHTTP(t, base+"/healthz")
	return base
}

// learner is a browser's cookie jar and what it sends.
type learner struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newLearner(t *testing.T, base string) *learner {
	jar, _ := cookiejar.New(nil)
	return &learner{t: t, base: base, c: &http.Client{Jar: jar, Timeout: 3 * time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (l *learner) do(req *http.Request) (int, string, http.Header) {
	l.t.Helper()
	resp, err := l.c.Do(req)
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func (l *learner) get(path string) (int, string, http.Header) {
	l.t.Helper()
	req, _ := http.NewRequest("GET", l.base+path, nil)
	return l.do(req)
}

var csrfToken = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)

// post sends a form with the CSRF token of the page it is on.
func (l *learner) post(page, path string, form url.Values) (int, string, http.Header) {
	l.t.Helper()
	_, body, _ := l.get(page)
	m := csrfToken.FindStringSubmatch(body)
	if m == nil {
		l.t.Fatalf("no CSRF token on %s\n%.300s", page, body)
	}
	form.Set("csrf_token", m[1])
	req, _ := http.NewRequest("POST", l.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return l.do(req)
}

// account registers email (password "correct horse battery") or logs it in.
func (l *learner) account(page, email string) {
	l.t.Helper()
	code, body, _ := l.post(page, page, url.Values{"email": {email}, "name": {"学员"}, "password": {"correct horse battery"}})
	if code != http.StatusSeeOther {
		l.t.Fatalf("%s %s: %d\n%.300s", page, email, code, body)
	}
}

// startLab starts a scenario's lab and returns its page's path.
func (l *learner) startLab(scenario string) string {
	l.t.Helper()
	code, body, h := l.post("/labs/"+scenario, "/labs/"+scenario+"/start", url.Values{})
	if code != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/lab/") {
		l.t.Fatalf("start %s: %d %s\n%.300s", scenario, code, h.Get("Location"), body)
	}
	return h.Get("Location")
}

type labState struct {
	State     string `json:"state"`
	Sandbox   string `json:"sandbox"`
	Confirmed bool   `json:"confirmed"`
	Failure   string `json:"failure"`
}

func (l *learner) state(lab string) labState {
	l.t.Helper()
	code, body, _ := l.get(lab + "/state")
	var st labState
	if err := json.Unmarshal([]byte(body), &st); code != http.StatusOK || err != nil {
		l.t.Fatalf("state of %s: %d %v\n%.300s", lab, code, err, body)
	}
	return st
}

// waitConfirmed waits until the lab's fault is confirmed (an answer can be
// graded at once).
func (l *learner) waitConfirmed(lab string) labState {
	l.t.Helper()
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		st := l.state(lab)
		switch {
		case st.State != "starting" && st.State != "ready":
			l.t.Fatalf("lab %s: %+v", lab, st)
		case st.Confirmed:
			return st
		}
	}
	l.t.Fatalf("lab %s not confirmed within 90 s", lab)
	return labState{}
}

// terminalNotice opens node1's terminal through base and returns the first
// control message (a text frame) the server sends.
func (l *learner) terminalNotice(base, lab string) string {
	l.t.Helper()
	ws := l.dialTerminal(base, lab)
	defer ws.Close()
	_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		typ, p, err := ws.ReadMessage()
		if err != nil {
			l.t.Fatalf("terminal through %s: %v before a notice", base, err)
		}
		if typ == websocket.TextMessage {
			return string(p)
		}
	}
}

// dialTerminal opens node1's terminal websocket through base.
func (l *learner) dialTerminal(base, lab string) *websocket.Conn {
	l.t.Helper()
	u, _ := url.Parse(l.base)
	h := http.Header{"Origin": {base}}
	for _, c := range l.c.Jar.Cookies(u) {
		h.Add("Cookie", c.Name+"="+c.Value)
	}
	ws, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(base, "http")+lab+"/term/node1/ws", h)
	if err != nil {
		l.t.Fatalf("terminal through %s: %v (%v)", base, err, resp)
	}
	return ws
}

// terminal opens node1's terminal through base, types line and reads until
// want appears.
func (l *learner) terminal(base, lab, line, want string) {
	l.t.Helper()
	ws := l.dialTerminal(base, lab)
	defer ws.Close()
	if err := ws.WriteMessage(websocket.BinaryMessage, []byte(line+"\n")); err != nil {
		l.t.Fatal(err)
	}
	var seen strings.Builder
	_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	for !strings.Contains(seen.String(), want) {
		typ, p, err := ws.ReadMessage()
		if err != nil {
			l.t.Fatalf("terminal through %s: %v; read so far:\n%s", base, err, seen.String())
		}
		if typ == websocket.BinaryMessage {
			seen.Write(p)
		}
	}
}
