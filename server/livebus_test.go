package server

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/commlab/commlab/course"
	"github.com/commlab/commlab/internal/pgtest"
	"github.com/commlab/commlab/server/store"
)

// TestLiveBus: two replicas over one PostgreSQL database; a change published on
// A wakes B's live views, also after B's listening connection was killed.
func TestLiveBus(t *testing.T) {
	pg := pgtest.Start(t)
	url := pg.URL(pg.NewDB(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	replica := func() *liveBus {
		st, err := store.OpenPostgres(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		b := &liveBus{pool: st.Pool(), hub: newLiveHub(), log: slog.New(slog.DiscardHandler)}
		go b.listen(ctx)
		return b
	}
	a, b := replica(), replica()
	// woken publishes on A until B's view of workshop id wakes: the listener may
	// still be connecting, and a view re-reads on a timer anyway.
	woken := func(id int64) bool {
		wake := b.hub.wait(id)
		other := b.hub.wait(id + 1000)
		for i := 0; i < 100; i++ {
			a.publish(ctx, id)
			select {
			case <-wake:
				select {
				case <-other:
					t.Fatalf("workshop %d woke on a change of %d", id+1000, id)
				default:
				}
				return true
			case <-time.After(100 * time.Millisecond):
			}
		}
		return false
	}
	if !woken(7) {
		t.Fatal("a change on replica A never reached replica B")
	}
	var killed int
	if err := a.pool.QueryRow(ctx, "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN%' AND pid <> pg_backend_pid()) k").Scan(&killed); err != nil || killed != 2 {
		t.Fatalf("killed %d listening connections (want 2): %v", killed, err)
	}
	if !woken(8) {
		t.Fatal("replica B did not listen again after its connection was killed")
	}
}

// TestLiveBusSQLite: without PostgreSQL the bus is this process's hub.
func TestLiveBusSQLite(t *testing.T) {
	srv, _ := newTestServer(t, Config{})
	if srv.bus.pool != nil {
		t.Fatal("a SQLite server has a PostgreSQL bus")
	}
	wake := srv.live.wait(3)
	srv.bus.publish(context.Background(), 3)
	select {
	case <-wake:
	default:
		t.Fatal("publish did not wake this replica")
	}
}

// TestReplicaLogins: two servers over one PostgreSQL database with the same
// secret key; a login made on A is a session on B.
func TestReplicaLogins(t *testing.T) {
	pg := pgtest.Start(t)
	dsn := pg.URL(pg.NewDB(t))
	lib, err := course.NewLibrary(fixture, course.Options{})
	if err != nil {
		t.Fatal(err)
	}
	replica := func() *testEnv {
		st, err := store.OpenPostgres(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		srv, err := New(Config{}, Deps{Library: lib, Store: st, Secret: []byte("0123456789abcdef0123456789abcdef"), Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(srv.Handler())
		t.Cleanup(hs.Close)
		return &testEnv{t: t, url: hs.URL, store: st, c: newClient()}
	}
	a, b := replica(), replica()
	c := newClient()
	a.register(c, "r@example.com")
	// Both listen on 127.0.0.1 and cookies ignore the port: c carries A's
	// session cookie to B as a proxy in front of both would.
	if code, _, _ := b.do(c, "GET", "/progress", nil); code != http.StatusOK {
		t.Fatalf("replica B answered %d to a login made on A", code)
	}
	if code, _, _ := b.do(newClient(), "GET", "/progress", nil); code == http.StatusOK {
		t.Fatal("replica B let a stranger in")
	}
	// A form served by B is accepted by A: the CSRF key is the shared secret.
	tok := b.csrf(c, "/progress")
	if code, _, _ := a.do(c, "POST", "/logout", url.Values{"csrf_token": {tok}}); code != http.StatusSeeOther {
		t.Fatalf("replica A refused replica B's CSRF token: %d", code)
	}
}
