package server

import (
	"net/url"
	"testing"
)

func TestSafeNext(t *testing.T) {
	for _, tt := range []struct{ next, want string }{
		{"/course/ch01", "/course/ch01"},
		{"/", "/"},
		{"/lab/x?tab=1#t", "/lab/x?tab=1#t"},
		{"", "/course"},
		{"course", "/course"},
		{"//evil.example/x", "/course"},
		{"/\\evil.example", "/course"},
		{"/\t/evil.example", "/course"}, // browsers drop the tab: //evil.example
		{"/\n/evil.example", "/course"},
		{"/\r/evil.example", "/course"},
		{"/a\\b", "/course"},
		{"/\x00x", "/course"},
		{"/\x7fx", "/course"},
		{"/\u0085/evil.example", "/course"},
		{"/\xff", "/course"},
		{"https://evil.example", "/course"},
		{"javascript:alert(1)", "/course"},
		{" /course", "/course"},
	} {
		if got := safeNext(tt.next); got != tt.want {
			t.Errorf("safeNext(%q) = %q, want %q", tt.next, got, tt.want)
		}
	}
}

// Both endpoints that redirect to ?next= stay on this site.
func TestNoOpenRedirect(t *testing.T) {
	e := newTestEnv(t, Config{})
	e.register(newClient(), "rd@example.com")
	for _, next := range []string{"/\t/evil.example", "//evil.example", "/\\evil.example", "https://evil.example/"} {
		if _, _, h := e.do(newClient(), "GET", "/lang/en?next="+url.QueryEscape(next), nil); h.Get("Location") != "/course" {
			t.Errorf("/lang/en?next=%q: Location %q", next, h.Get("Location"))
		}
		c := newClient()
		tok := e.csrf(c, "/login?next="+url.QueryEscape(next))
		code, _, h := e.do(c, "POST", "/login", url.Values{"csrf_token": {tok}, "email": {"rd@example.com"}, "password": {"correct horse battery"}, "next": {next}})
		if code != 303 || h.Get("Location") != "/course" {
			t.Errorf("login next=%q: %d Location %q", next, code, h.Get("Location"))
		}
	}
}
