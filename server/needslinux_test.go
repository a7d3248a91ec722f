package server

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/course"
	"github.com/commlab/commlab/labs"
	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/labs/topology"
	"github.com/commlab/commlab/scenarios"
	"github.com/commlab/commlab/server/store"
	"github.com/commlab/commlab/web"
)

// notLinux is what backend.Local is on a build for another OS: every lab is
// refused by Check (the host itself lies outside the server).
type notLinux struct{ ups int }

func (notLinux) Check(scenarios.Environment) error { return labs.ErrNeedsLinux }

func (h *notLinux) Up(context.Context, scenarios.Environment, time.Duration, func(session.Progress)) (session.Env, error) {
	h.ups++
	return nil, labs.ErrNeedsLinux
}

// TestNeedsLinux: on a build for another OS (serve turns labs off with
// labs.ErrNeedsLinux; a provider refuses with it), the course still serves and
// a lab start is refused with the one translated message, before anything starts.
func TestNeedsLinux(t *testing.T) {
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
	lib, err := course.NewLibrary(fixture, course.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := web.T("zh-CN", "err.needslinux")
	if want == "err.needslinux" || web.T("en", "err.needslinux") == "err.needslinux" {
		t.Fatal("err.needslinux is missing from the catalogue")
	}
	tests := []struct {
		name string
		deps func(*Deps) *notLinux
	}{
		{"labs off", func(d *Deps) *notLinux { d.LabsOff = labs.ErrNeedsLinux; return nil }},
		{"provider refuses", func(d *Deps) *notLinux {
			h := &notLinux{}
			d.Labs = session.NewManager(context.Background(), session.Config{Provider: h, DataDir: t.TempDir()})
			return h
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := store.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "commlab.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			d := Deps{Library: lib, Store: st, Secret: []byte("0123456789abcdef0123456789abcdef"), Scenarios: cat, Log: slog.New(slog.DiscardHandler)}
			host := tt.deps(&d)
			srv, err := New(Config{}, d)
			if err != nil {
				t.Fatal(err)
			}
			hs := httptest.NewServer(srv.Handler())
			t.Cleanup(hs.Close)
			e := &testEnv{t: t, url: hs.URL, store: st, c: newClient()}
			c := newClient()
			e.register(c, "mac@example.com")
			if code, _, _ := e.do(c, "GET", "/course", nil); code != http.StatusOK {
				t.Errorf("course: %d", code)
			}
			_, page, _ := e.do(c, "GET", "/labs/ch01-tour", nil)
			if !strings.Contains(page, want) {
				t.Errorf("the lab page does not say labs need Linux")
			}
			tok := e.csrf(c, "/labs/ch01-tour")
			code, body, _ := e.do(c, "POST", "/labs/ch01-tour/start", url.Values{"csrf_token": {tok}})
			if code != http.StatusServiceUnavailable || !strings.Contains(body, want) {
				t.Errorf("start: %d\n%.400s", code, body)
			}
			if host != nil && host.ups != 0 {
				t.Errorf("Up was called %d times", host.ups)
			}
		})
	}
}
