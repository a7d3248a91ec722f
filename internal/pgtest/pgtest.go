// Package pgtest starts a throwaway PostgreSQL server for tests: a fresh
// cluster in a temporary directory, reachable only through a unix socket in
// that directory, stopped and removed when the test ends.
//
// Tests skip when PostgreSQL's server binaries are absent, unless
// COMMLAB_REQUIRE_POSTGRES=1 (set by .ci/run, which installs them), where
// they fail instead.
package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is a running throwaway cluster.
type Server struct {
	dir string // holds data/ and the socket
	dbs atomic.Int64
}

// binDir finds the directory of initdb and pg_ctl: on PATH, or Debian's
// /usr/lib/postgresql/VERSION/bin (the newest), which is not on PATH.
func binDir() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if _, err := exec.LookPath("initdb"); err == nil {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("no initdb and pg_ctl on PATH or in /usr/lib/postgresql/*/bin (Debian: apt-get install postgresql)")
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// Start starts a cluster for t and stops it when t ends. PostgreSQL refuses
// to run as root, so under root the server runs as nobody.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := binDir()
	if err != nil {
		if os.Getenv("COMMLAB_REQUIRE_POSTGRES") == "1" {
			t.Fatalf("PostgreSQL is required (COMMLAB_REQUIRE_POSTGRES=1): %v", err)
		}
		t.Skipf("PostgreSQL tests skipped: %v", err)
	}
	// Short, so the socket path stays under the 107-byte limit of sun_path.
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	attr, err := runAs(dir)
	if err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) error {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "LC_ALL=C", "TZ=UTC"}
		cmd.SysProcAttr = attr
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s %v: %w\n%s", name, args, err, out)
		}
		return nil
	}
	data := filepath.Join(dir, "data")
	if err := run("initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-instructions"); err != nil {
		t.Fatal(err)
	}
	// No TCP listener: the socket in dir is the only way in. fsync off: the
	// cluster is thrown away.
	opts := "-k " + dir + " -c listen_addresses= -c fsync=off -c full_page_writes=off"
	if err := run("pg_ctl", "start", "-w", "-t", "60", "-D", data, "-l", filepath.Join(dir, "server.log"), "-o", opts); err != nil {
		if log, _ := os.ReadFile(filepath.Join(dir, "server.log")); len(log) > 0 {
			err = fmt.Errorf("%w\nserver.log:\n%s", err, log)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := run("pg_ctl", "stop", "-w", "-m", "fast", "-D", data); err != nil {
			t.Errorf("stop PostgreSQL: %v", err)
		}
	})
	return &Server{dir: dir}
}

// URL returns the URL of database db on s, as `commlab --store` takes it.
func (s *Server) URL(db string) string {
	return "postgres:///" + db + "?" + url.Values{"host": {s.dir}, "user": {"postgres"}, "sslmode": {"disable"}}.Encode()
}

// NewDB creates an empty database and returns its name.
func (s *Server) NewDB(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d", s.dbs.Add(1))
	s.Exec(t, "postgres", "CREATE DATABASE "+name)
	return name
}

// Exec runs statements in database db as the superuser.
func (s *Server) Exec(t testing.TB, db, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL(db))
	if err != nil {
		t.Fatalf("connect to %s: %v", db, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
