package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/commlab/commlab/cert"
	"github.com/commlab/commlab/course"
	"github.com/commlab/commlab/server/store"
	"github.com/commlab/commlab/web"
)

// newCertEnv is a test server with a certificate key.
func newCertEnv(t *testing.T) (*testEnv, *Server) {
	t.Helper()
	lib, err := course.NewLibrary(fixture, course.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "commlab.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	key, err := cert.LoadOrCreateKey(filepath.Join(t.TempDir(), "cert.key"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{}, Deps{Library: lib, Store: st, Secret: []byte("0123456789abcdef0123456789abcdef"), Log: slog.New(slog.DiscardHandler), CertKey: key})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return &testEnv{t: t, url: hs.URL, store: st, c: newClient()}, srv
}

func (e *testEnv) verdict(path string) Verdict {
	e.t.Helper()
	code, body, _ := e.do(e.c, "GET", path, nil)
	if code != http.StatusOK {
		e.t.Fatalf("GET %s: %d %s", path, code, body)
	}
	var v Verdict
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		e.t.Fatalf("GET %s: %v\n%s", path, err, body)
	}
	return v
}

func TestCertificateVerification(t *testing.T) {
	e, srv := newCertEnv(t)
	admin := newClient()
	e.register(admin, "admin@example.com") // the first account is the admin
	u, err := e.store.UserByEmail(context.Background(), "admin@example.com")
	if err != nil {
		t.Fatal(err)
	}
	c, err := srv.ca.issue(context.Background(), u, 0, "m12", "commlab 认证：多卡通信故障诊断（模块 1–2）", "merit")
	if err != nil {
		t.Fatal(err)
	}
	_, doc, _ := e.do(e.c, "GET", "/verify/"+c.ID+"/certificate.json", nil)

	// The published key verifies the downloaded document offline.
	_, pemKey, _ := e.do(e.c, "GET", "/cert/key.pem", nil)
	pub, err := cert.ParsePublicKeyPEM([]byte(pemKey))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify([]byte(doc), pub, nil); err != nil {
		t.Fatalf("offline verify of the downloaded document: %v", err)
	}

	tampered := strings.Replace(doc, `"merit"`, `"merix"`, 1)
	tests := []struct {
		path   string
		valid  bool
		reason string
	}{
		{"/api/verify/" + c.ID, true, ""},
		{"/api/verify?doc=" + url.QueryEscape(doc), true, ""},
		{"/api/verify?doc=" + url.QueryEscape(tampered), false, "bad-signature"},
		{"/api/verify?doc=" + url.QueryEscape(strings.Replace(doc, ",", ", ", 1)), false, "altered"},
		{"/api/verify?doc=hello", false, "malformed"},
		{"/api/verify/CL-AAAA-AAAA-AAAA-AAAA", false, "unknown"},
	}
	for _, tt := range tests {
		v := e.verdict(tt.path)
		if v.Valid != tt.valid || v.Reason != tt.reason {
			t.Errorf("%s: valid %v reason %q, want %v %q", tt.path, v.Valid, v.Reason, tt.valid, tt.reason)
		}
	}
	code, page, _ := e.do(e.c, "GET", "/verify/"+c.ID, nil)
	if code != 200 || !strings.Contains(page, `data-valid="true"`) || !strings.Contains(page, "良好") || !strings.Contains(page, c.ID) {
		t.Errorf("verify page: %d\n%s", code, page)
	}
	code, page, _ = e.do(e.c, "GET", "/verify?doc="+url.QueryEscape(tampered), nil)
	if code != 200 || !strings.Contains(page, `data-reason="bad-signature"`) {
		t.Errorf("verify page, tampered: %d\n%s", code, page)
	}
	if code, _, _ := e.do(e.c, "GET", "/verify/CL-AAAA-AAAA-AAAA-AAAA", nil); code != http.StatusNotFound {
		t.Errorf("unknown id page: %d, want 404", code)
	}

	// Only an admin revokes, and only with a reason.
	learner := newClient()
	e.register(learner, "learner@example.com")
	tok := e.csrf(learner, "/verify")
	if code, _, _ := e.do(learner, "POST", "/admin/certs/"+c.ID+"/revoke", url.Values{"csrf_token": {tok}, "reason": {"x"}}); code != http.StatusForbidden {
		t.Errorf("learner revoke: %d, want 403", code)
	}
	tok = e.csrf(admin, "/verify/"+c.ID)
	if code, _, _ := e.do(admin, "POST", "/admin/certs/"+c.ID+"/revoke", url.Values{"csrf_token": {tok}, "reason": {" "}}); code != http.StatusBadRequest {
		t.Errorf("revoke without reason: %d, want 400", code)
	}
	if code, body, _ := e.do(admin, "POST", "/admin/certs/"+c.ID+"/revoke", url.Values{"csrf_token": {tok}, "reason": {"考试作废：答案外泄"}}); code != http.StatusSeeOther {
		t.Fatalf("revoke: %d %s", code, body)
	}
	for _, p := range []string{"/api/verify/" + c.ID, "/api/verify?doc=" + url.QueryEscape(doc)} {
		if v := e.verdict(p); v.Valid || v.Reason != "revoked" || v.Revocation != "考试作废：答案外泄" {
			t.Errorf("%s after revoke: %+v", p, v)
		}
	}
	_, page, _ = e.do(e.c, "GET", "/verify/"+c.ID, nil)
	if !strings.Contains(page, `data-reason="revoked"`) || !strings.Contains(page, "考试作废：答案外泄") {
		t.Errorf("verify page after revoke:\n%s", page)
	}
	// The published revocation list carries it, signed, for offline checks.
	_, list, _ := e.do(e.c, "GET", "/cert/revocations.json", nil)
	rl, err := cert.ParseRevocations([]byte(list), pub)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify([]byte(doc), pub, rl); err == nil {
		t.Error("offline verify with the revocation list accepted a revoked certificate")
	}
}

func TestCertCatalogue(t *testing.T) {
	keys := []string{reasonKey("unknown")}
	for _, rc := range reasonCodes {
		keys = append(keys, reasonKey(rc.code))
	}
	for _, b := range []string{"pass", "merit", "distinction"} {
		keys = append(keys, bandKey(b))
	}
	for _, k := range keys {
		if web.T("en", k) == k {
			t.Errorf("catalogue lacks %q", k)
		}
	}
}
