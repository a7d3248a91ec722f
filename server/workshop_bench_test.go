package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/gorilla/websocket"

	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/scenarios"
	"github.com/commlab/commlab/server/store"
)

// liveFigures are one run of BenchmarkWorkshopLive.
type liveFigures struct {
	dashMs         float64 // one dashboard snapshot, built in process
	dashKB         float64 // its JSON frame
	fanP50, fanP99 float64 // journal write to each learner's frame, ms
	instMs         float64 // journal write to the instructor's dashboard frame, ms (median)
	heapMB         float64 // heap in use with every lab and socket open
}

// BenchmarkWorkshopLive drives a workshop of N learners (50, then 200), each with a
// running lab on the fake host (labpages_test.go) and their live websocket open, and
// the instructor's dashboard: what one dashboard snapshot costs and weighs, and how
// long one journal event (a message) takes to reach every learner's socket and the
// dashboard. Every learner has graded attempts at the workshop's lab and at
// gradedBefore others. Labs are fakes, so the figures are the server's own work.
// It prints the figures side by side with their ratio: 4 is linear growth from 50
// to 200.
func BenchmarkWorkshopLive(b *testing.B) {
	sizes := []int{50, 200}
	got := map[int]liveFigures{}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("learners=%d", n), func(b *testing.B) {
			var f liveFigures
			for i := 0; i < b.N; i++ {
				f = workshopLive(b, n)
			}
			got[n] = f
			b.ReportMetric(f.dashMs, "dash-ms")
			b.ReportMetric(f.fanP50, "fanout-p50-ms")
			b.ReportMetric(f.fanP99, "fanout-p99-ms")
			b.ReportMetric(f.instMs, "dashboard-ms")
		})
	}
	lo, hi := got[sizes[0]], got[sizes[1]]
	if lo.dashMs == 0 || hi.dashMs == 0 {
		return // a sub-benchmark was filtered out or failed
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "workshop live\t%d learners\t%d learners\tratio\t\n", sizes[0], sizes[1])
	for _, r := range []struct {
		name   string
		lo, hi float64
	}{
		{"dashboard snapshot (ms)", lo.dashMs, hi.dashMs},
		{"dashboard frame (KB)", lo.dashKB, hi.dashKB},
		{"event → dashboard (ms)", lo.instMs, hi.instMs},
		{"event → learners p50 (ms)", lo.fanP50, hi.fanP50},
		{"event → learners p99 (ms)", lo.fanP99, hi.fanP99},
		{"heap in use (MB)", lo.heapMB, hi.heapMB},
	} {
		fmt.Fprintf(w, "%s\t%.2f\t%.2f\t%.1f\t\n", r.name, r.lo, r.hi, r.hi/r.lo)
	}
	w.Flush()
}

// events is how many messages each run fans out.
const events = 5

// gradedBefore is how many of the course's labs each learner was graded in before.
const gradedBefore = 6

func workshopLive(b *testing.B, n int) liveFigures {
	b.Helper()
	b.StopTimer()
	ctx := context.Background()
	srv, st := newTestServer(b, Config{})
	host := &fakeHost{}
	mctx, cancel := context.WithCancel(ctx)
	mgr := session.NewManager(mctx, session.Config{Provider: host, Faults: host, DataDir: b.TempDir(), NoStream: true,
		Log: slog.New(slog.DiscardHandler)})
	defer func() { mgr.Shutdown(); cancel() }()
	srv.cats, srv.labs = catalog(b), mgr
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	db := st.(store.Workshops)

	sc, _ := srv.cats.Get("ch08-link-loss")
	// Each learner comes with graded attempts: at this lab and at labs of the course
	// before the workshop.
	graded := append([]*scenarios.Scenario{sc}, srv.cats.All()[:gradedBefore]...)
	user := func(i int, role store.Role) (int64, string) {
		u := &store.User{Email: fmt.Sprintf("u%d@example.com", i), Name: fmt.Sprintf("学员%d", i), Role: role, PasswordHash: "x"}
		if err := st.CreateUser(ctx, u); err != nil {
			b.Fatal(err)
		}
		tok, err := st.CreateSession(ctx, u.ID, time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		return u.ID, tok
	}
	inst, instTok := user(0, store.RoleInstructor)
	w := &store.Workshop{InstructorID: inst, Title: "bench", Code: "BENCH", Labs: []string{sc.ID}, Opened: 1, LabTTL: time.Hour,
		StartsAt: time.Now(), EndsAt: time.Now().Add(4 * time.Hour)}
	if err := db.CreateWorkshop(ctx, w); err != nil {
		b.Fatal(err)
	}
	toks := make([]string, n)
	var labs []*session.Lab
	for i := range n {
		id, tok := user(i+1, store.RoleLearner)
		toks[i] = tok
		if err := db.JoinWorkshop(ctx, w.ID, id); err != nil {
			b.Fatal(err)
		}
		for k, other := range graded {
			if err := st.RecordLab(ctx, id, other.Chapter, other.ID, float64(k)/float64(len(graded)), k%2 == 0); err != nil {
				b.Fatal(err)
			}
		}
		l, err := mgr.StartTTL(id, sc.Draw(scenarios.SeedFor(nil, id, sc.ID, 1)), time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		labs = append(labs, l)
	}
	for _, l := range labs {
		select {
		case <-l.Up():
		case <-time.After(time.Minute):
			b.Fatalf("lab not up: %+v", l.Status())
		}
	}

	// Every learner's socket and the dashboard; each reader notes when it first sees
	// each message.
	var mu sync.Mutex
	var start [events]time.Time
	seen := make([]map[int]time.Duration, n+1) // index n: the instructor
	var wg sync.WaitGroup
	dial := func(slot int, tok, path string) *websocket.Conn {
		h := http.Header{"Origin": {hs.URL}, "Cookie": {sessionCookie + "=" + tok}}
		conn, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(hs.URL, "http")+path, h)
		if err != nil {
			b.Fatalf("dial %s: %v (%v)", path, err, resp)
		}
		seen[slot] = map[int]time.Duration{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				_, p, err := conn.ReadMessage()
				if err != nil {
					return
				}
				mu.Lock()
				for k := range events {
					if _, ok := seen[slot][k]; !ok && !start[k].IsZero() && strings.Contains(string(p), fmt.Sprintf("bench-message-%d", k)) {
						seen[slot][k] = time.Since(start[k])
					}
				}
				mu.Unlock()
			}
		}()
		return conn
	}
	var conns []*websocket.Conn
	for i, tok := range toks {
		conns = append(conns, dial(i, tok, fmt.Sprintf("/workshops/%d/events/ws", w.ID)))
	}
	conns = append(conns, dial(n, instTok, fmt.Sprintf("/workshops/%d/live/ws", w.ID)))
	defer func() {
		for _, c := range conns {
			c.Close()
		}
		wg.Wait()
	}()
	time.Sleep(time.Second) // the first snapshots go out

	var f liveFigures
	b.StartTimer()
	const snapshots = 20
	cmds := &commandCache{}
	t0 := time.Now()
	var d *dashboard
	for range snapshots {
		var err error
		if d, err = srv.dashboard(ctx, w, "zh-CN", cmds, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
	f.dashMs = float64(time.Since(t0).Microseconds()) / 1000 / snapshots
	frame, _ := json.Marshal(d)
	f.dashKB = float64(len(frame)) / 1024
	if len(d.Learners) != n {
		b.Fatalf("the dashboard shows %d learners, want %d", len(d.Learners), n)
	}

	var fan, dash []float64
	for k := range events {
		mu.Lock()
		start[k] = time.Now()
		mu.Unlock()
		if err := srv.journal(ctx, &store.WorkshopEvent{WorkshopID: w.ID, Kind: evMessage, Public: fmt.Sprintf("bench-message-%d", k)}); err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(time.Minute)
		for {
			mu.Lock()
			done := 0
			for _, s := range seen {
				if _, ok := s[k]; ok {
					done++
				}
			}
			mu.Unlock()
			if done == n+1 {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("message %d reached %d of %d sockets in a minute", k, done, n+1)
			}
			time.Sleep(time.Millisecond)
		}
	}
	b.StopTimer()
	mu.Lock()
	for slot, s := range seen {
		for _, d := range s {
			ms := float64(d.Microseconds()) / 1000
			if slot == n {
				dash = append(dash, ms)
			} else {
				fan = append(fan, ms)
			}
		}
	}
	mu.Unlock()
	f.fanP50, f.fanP99, f.instMs = pct(fan, 50), pct(fan, 99), pct(dash, 50)
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	f.heapMB = float64(m.HeapInuse) / (1 << 20)
	return f
}

func pct(xs []float64, p int) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}
