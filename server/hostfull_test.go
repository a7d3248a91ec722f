package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/course"
	"github.com/commlab/commlab/labs/netns"
	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/labs/topology"
	"github.com/commlab/commlab/scenarios"
	"github.com/commlab/commlab/server/store"
)

// fullHost is a provider whose host has no free sandbox slot (what
// backend.Local.Check reports then); the host itself lies outside the server.
type fullHost struct{ ups int }

func (fullHost) Check(scenarios.Environment) error {
	return fmt.Errorf("%w: all 128 sandbox slots of this host are taken", netns.ErrBusy)
}

func (h *fullHost) Up(context.Context, scenarios.Environment, time.Duration, func(session.Progress)) (session.Env, error) {
	h.ups++
	return nil, fmt.Errorf("Up called on a full host")
}

// TestFullHostRefusesUpFront: a start on a full host is refused at once with a
// message for the learner (not operator advice such as "run commlab sweep"),
// and no lab is started.
func TestFullHostRefusesUpFront(t *testing.T) {
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
	st, err := store.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "commlab.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	host := &fullHost{}
	mgr := session.NewManager(context.Background(), session.Config{Provider: host, DataDir: t.TempDir()})
	srv, err := New(Config{}, Deps{Library: lib, Store: st, Secret: []byte("0123456789abcdef0123456789abcdef"), Scenarios: cat, Labs: mgr, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	e := &testEnv{t: t, url: hs.URL, store: st, c: newClient()}
	c := newClient()
	e.register(c, "full@example.com")
	_, page, _ := e.do(c, "GET", "/labs/ch01-tour", nil)
	if !strings.Contains(page, "实验名额现在都被其他学员占用") {
		t.Errorf("the lab page does not say the host is full")
	}
	tok := e.csrf(c, "/labs/ch01-tour")
	code, body, _ := e.do(c, "POST", "/labs/ch01-tour/start", url.Values{"csrf_token": {tok}})
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "请过几分钟再开始") {
		t.Errorf("start on a full host: %d\n%.400s", code, body)
	}
	if strings.Contains(body, "sweep") || strings.Contains(page, "sweep") {
		t.Error("the learner is shown operator advice (sweep)")
	}
	if len(mgr.All()) != 0 || host.ups != 0 {
		t.Errorf("a lab was started on a full host: %d labs, %d Up calls", len(mgr.All()), host.ups)
	}
}
