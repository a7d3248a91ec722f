package server

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"modernc.org/sqlite"

	"github.com/commlab/commlab/server/store"
)

// statements counts what the store sends SQLite through countingDriver.
var statements atomic.Int64

// countingDriver is modernc's SQLite driver, counting every statement and
// transaction its connections start.
type countingDriver struct{ sqlite.Driver }

// sqliteConn is what modernc's connection offers database/sql.
type sqliteConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
}

type countingConn struct{ sqliteConn }

func (d *countingDriver) Open(name string) (driver.Conn, error) {
	c, err := d.Driver.Open(name)
	if err != nil {
		return nil, err
	}
	return countingConn{c.(sqliteConn)}, nil
}

func (c countingConn) BeginTx(ctx context.Context, o driver.TxOptions) (driver.Tx, error) {
	statements.Add(1)
	return c.sqliteConn.BeginTx(ctx, o)
}

func (c countingConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	statements.Add(1)
	return c.sqliteConn.PrepareContext(ctx, q)
}

func (c countingConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	statements.Add(1)
	return c.sqliteConn.ExecContext(ctx, q, args)
}

func (c countingConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	statements.Add(1)
	return c.sqliteConn.QueryContext(ctx, q, args)
}

func init() { sql.Register("sqlite-counting", &countingDriver{}) }

// TestDashboardQueries: a dashboard snapshot reads the store with the same few
// statements for 2 learners as for 40, and still shows each one's records.
func TestDashboardQueries(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenSQLiteVia(ctx, "sqlite-counting", filepath.Join(t.TempDir(), "commlab.db"))
	if err != nil {
		t.Fatal(err)
	}
	srv := newTestServerOn(t, Config{}, st)
	srv.cats = catalog(t)
	inst := &store.User{Email: "i@example.com", Name: "讲师", Role: store.RoleInstructor, PasswordHash: "x"}
	if err := st.CreateUser(ctx, inst); err != nil {
		t.Fatal(err)
	}
	const lab = "ch08-link-loss"
	w := &store.Workshop{InstructorID: inst.ID, Title: "t", Code: "COUNT", Labs: []string{lab, "ch01-tour"}, Opened: 1,
		LabTTL: time.Hour, StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour)}
	if err := st.CreateWorkshop(ctx, w); err != nil {
		t.Fatal(err)
	}
	// grow adds learners up to n, every other one with a pass in the lab, each
	// with a journal line.
	members := 0
	grow := func(n int) {
		for ; members < n; members++ {
			u := joinLearner(t, st, w, members)
			if err := st.RecordLab(ctx, u.ID, "ch08", lab, 0.5+float64(members%2)/2, members%2 == 1); err != nil {
				t.Fatal(err)
			}
			if err := st.LogWorkshopEvent(ctx, &store.WorkshopEvent{WorkshopID: w.ID, LearnerID: u.ID, Kind: evJoined}); err != nil {
				t.Fatal(err)
			}
		}
	}
	snapshot := func() (*dashboard, int64) {
		before := statements.Load()
		d, err := srv.dashboard(ctx, w, "zh-CN", &commandCache{}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return d, statements.Load() - before
	}
	var counts []int64
	for _, n := range []int{2, 40} {
		grow(n)
		d, k := snapshot()
		counts = append(counts, k)
		if len(d.Learners) != n {
			t.Fatalf("%d learners on the dashboard, want %d", len(d.Learners), n)
		}
		last := d.Learners[n-1]
		if c := last.Cells[0]; last.Name != fmt.Sprintf("学员%d", n-1) || c.State != "passed" || c.Score != "100%" {
			t.Errorf("the last learner's row: %+v", last)
		}
		if c := d.Learners[0].Cells[0]; c.State != "failed" || c.Score != "50%" {
			t.Errorf("the first learner's cell: %+v", c)
		}
		if got := d.Timeline[n-1].Whom; got != last.Name {
			t.Errorf("the timeline's last line is about %q, want %q", got, last.Name)
		}
	}
	if counts[0] != counts[1] || counts[0] > 2 {
		t.Errorf("a dashboard snapshot took %d statements with 2 learners and %d with 40; want the same, at most 2", counts[0], counts[1])
	}
}

// joinLearner makes learner i (l<i>@example.com) and joins them to w.
func joinLearner(t *testing.T, st store.DB, w *store.Workshop, i int) *store.User {
	t.Helper()
	ctx := context.Background()
	u := &store.User{Email: fmt.Sprintf("l%d@example.com", i), Name: fmt.Sprintf("学员%d", i), Role: store.RoleLearner, PasswordHash: "x"}
	if err := st.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	if err := st.JoinWorkshop(ctx, w.ID, u.ID); err != nil {
		t.Fatal(err)
	}
	return u
}
