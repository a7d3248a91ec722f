package auth

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
)

func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

func mustCSRF(t *testing.T, key []byte, previous ...[]byte) *CSRF {
	t.Helper()
	c, err := NewCSRF(key, previous...)
	if err != nil {
		t.Fatalf("NewCSRF: %v", err)
	}
	return c
}

func TestCSRFValid(t *testing.T) {
	c := mustCSRF(t, testKey(1))
	other := mustCSRF(t, testKey(2))
	rotated := mustCSRF(t, testKey(2), testKey(1)) // key 1 retired in favour of key 2
	tok := c.Token("session-a")
	if tok2 := c.Token("session-a"); tok2 == tok {
		t.Error("two tokens for one session are equal: nonce not random")
	}
	parts := strings.Split(tok, ".")
	tamper := func(i int) string {
		p := append([]string(nil), parts...)
		b := []byte(p[i])
		b[0] ^= 1
		p[i] = string(b)
		return strings.Join(p, ".")
	}
	tests := []struct {
		name    string
		c       *CSRF
		session string
		token   string
		want    bool
	}{
		{"same session", c, "session-a", tok, true},
		{"second token same session", c, "session-a", c.Token("session-a"), true},
		{"other session", c, "session-b", tok, false},
		{"session prefix", c, "session-", tok, false},
		{"other key", other, "session-a", tok, false},
		{"previous key after rotation", rotated, "session-a", tok, true},
		{"new key after rotation", rotated, "session-a", rotated.Token("session-a"), true},
		{"new key's token on old signer", c, "session-a", rotated.Token("session-a"), false},
		{"empty token", c, "session-a", "", false},
		{"empty session", c, "", c.Token(""), false},
		{"tampered nonce", c, "session-a", tamper(2), false},
		{"tampered mac", c, "session-a", tamper(3), false},
		{"unknown key id", c, "session-a", tamper(1), false},
		{"other version", c, "session-a", "v2" + strings.TrimPrefix(tok, "v1"), false},
		{"truncated", c, "session-a", tok[:len(tok)-2], false},
		{"extra part", c, "session-a", tok + ".x", false},
		{"padded base64", c, "session-a", tok + "=", false},
	}
	for _, tc := range tests {
		if got := tc.c.Valid(tc.session, tc.token); got != tc.want {
			t.Errorf("%s: Valid = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestNewCSRFRejectsShortKeys(t *testing.T) {
	if _, err := NewCSRF(make([]byte, 16)); err == nil || !strings.Contains(err.Error(), "16 bytes") {
		t.Errorf("NewCSRF(16-byte key) error = %v, want one naming the size", err)
	}
	if _, err := NewCSRF(testKey(1), []byte("short")); err == nil {
		t.Error("NewCSRF accepted a short previous key")
	}
	// The signer keeps its own copy: changing the caller's slice changes nothing.
	key := testKey(3)
	c := mustCSRF(t, key)
	tok := c.Token("s")
	key[0] ^= 0xff
	if !c.Valid("s", tok) {
		t.Error("token invalid after the caller modified its key slice")
	}
}

func csrfServer(t *testing.T, c *CSRF) *gin.Engine {
	t.Helper()
	gin.SetMode(gin.TestMode)
	r := gin.New()
	r.Use(c.Middleware(func(g *gin.Context) string {
		sid, _ := g.Cookie("sid")
		return sid
	}))
	r.GET("/form", func(g *gin.Context) { g.String(http.StatusOK, g.GetString(CSRFContextKey)) })
	ok := func(g *gin.Context) { g.String(http.StatusOK, "done") }
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions} {
		r.Handle(m, "/act", ok)
	}
	return r
}

func TestCSRFMiddleware(t *testing.T) {
	c := mustCSRF(t, testKey(7))
	srv := csrfServer(t, c)

	// A GET hands out a token for the session.
	req := httptest.NewRequest(http.MethodGet, "/form", nil)
	req.AddCookie(&http.Cookie{Name: "sid", Value: "s1"})
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, req)
	tok := w.Body.String()
	if w.Code != http.StatusOK || !c.Valid("s1", tok) {
		t.Fatalf("GET /form = %d %q; want 200 and a valid token for s1", w.Code, tok)
	}
	otherTok := c.Token("s2")

	form := func(v string) url.Values { return url.Values{CSRFField: {v}} }
	tests := []struct {
		name     string
		method   string
		sid      string
		header   string
		form     url.Values
		json     bool
		wantCode int
	}{
		{"post without token", http.MethodPost, "s1", "", nil, false, http.StatusForbidden},
		{"post with header", http.MethodPost, "s1", tok, nil, false, http.StatusOK},
		{"post with form field", http.MethodPost, "s1", "", form(tok), false, http.StatusOK},
		{"post with other session's token", http.MethodPost, "s1", otherTok, nil, false, http.StatusForbidden},
		{"post with other session's token in form", http.MethodPost, "s1", "", form(otherTok), false, http.StatusForbidden},
		{"post with garbage", http.MethodPost, "s1", "garbage", nil, false, http.StatusForbidden},
		{"post without session", http.MethodPost, "", tok, nil, false, http.StatusForbidden},
		{"put without token", http.MethodPut, "s1", "", nil, false, http.StatusForbidden},
		{"put with header", http.MethodPut, "s1", tok, nil, false, http.StatusOK},
		{"patch without token", http.MethodPatch, "s1", "", nil, false, http.StatusForbidden},
		{"delete without token", http.MethodDelete, "s1", "", nil, false, http.StatusForbidden},
		{"delete with header", http.MethodDelete, "s1", tok, nil, false, http.StatusOK},
		{"json post without token", http.MethodPost, "s1", "", nil, true, http.StatusForbidden},
		{"options needs no token", http.MethodOptions, "s1", "", nil, false, http.StatusOK},
	}
	for _, tc := range tests {
		var body *strings.Reader
		if tc.form != nil {
			body = strings.NewReader(tc.form.Encode())
		} else {
			body = strings.NewReader("")
		}
		req := httptest.NewRequest(tc.method, "/act", body)
		if tc.form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if tc.json {
			req.Header.Set("Accept", "application/json")
		}
		if tc.sid != "" {
			req.AddCookie(&http.Cookie{Name: "sid", Value: tc.sid})
		}
		if tc.header != "" {
			req.Header.Set(CSRFHeader, tc.header)
		}
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		if w.Code != tc.wantCode {
			t.Errorf("%s: status %d, want %d (body %q)", tc.name, w.Code, tc.wantCode, w.Body.String())
			continue
		}
		switch {
		case tc.wantCode == http.StatusOK && w.Body.String() != "done":
			t.Errorf("%s: body %q, want the handler's", tc.name, w.Body.String())
		case tc.wantCode == http.StatusForbidden && tc.json:
			var got struct{ Error string }
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || got.Error != CSRFMessage {
				t.Errorf("%s: body %q, want JSON {\"error\": %q}", tc.name, w.Body.String(), CSRFMessage)
			}
		case tc.wantCode == http.StatusForbidden && strings.TrimSpace(w.Body.String()) != CSRFMessage:
			t.Errorf("%s: body %q, want %q", tc.name, w.Body.String(), CSRFMessage)
		}
	}
}
