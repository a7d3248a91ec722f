package session

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// returns reports whether f returns within a moment (true) or is still blocked.
func returns(f func()) bool {
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(200 * time.Millisecond):
		return false
	}
}

// until waits for the Turns' state to satisfy ok.
func until(t *testing.T, turns *Turns, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		turns.mu.Lock()
		done := ok()
		turns.mu.Unlock()
		if done {
			return
		}
	}
	t.Fatal("the turns never reached the state waited for")
}

// TestTurns: chart runs share the host; a graded run waits for those in flight and
// for the graded run before it, and holds chart runs back until it is done; graded
// runs waiting go before chart runs.
func TestTurns(t *testing.T) {
	ctx := context.Background()
	turns := Turns{Grace: time.Hour}
	release1, err := turns.Chart(ctx)
	if err != nil {
		t.Fatal(err)
	}
	release2, err := turns.Chart(ctx)
	if err != nil {
		t.Fatal(err)
	}

	graded := make(chan func())
	go func() {
		release, err := turns.Graded(ctx)
		if err != nil {
			t.Error(err)
		}
		graded <- release
	}()
	until(t, &turns, func() bool { return turns.waiting == 1 })
	release1()
	select {
	case <-graded:
		t.Fatal("the graded run started before every chart run in flight had ended")
	case <-time.After(50 * time.Millisecond):
	}
	release2()
	releaseGraded := <-graded

	var chartRelease func()
	chartWaits := make(chan struct{})
	go func() {
		defer close(chartWaits)
		chartRelease, err = turns.Chart(ctx)
	}()
	secondGraded := make(chan func())
	go func() {
		r, _ := turns.Graded(ctx)
		secondGraded <- r
	}()
	until(t, &turns, func() bool { return turns.waiting == 1 })
	select {
	case <-chartWaits:
		t.Fatal("a chart run started while a graded run held the host")
	case <-secondGraded:
		t.Fatal("two graded runs held the host at once")
	case <-time.After(100 * time.Millisecond):
	}
	releaseGraded()
	releaseGraded() // a second call changes nothing
	release := <-secondGraded
	select {
	case <-chartWaits:
		t.Fatal("a chart run started beside the second graded run")
	case <-time.After(50 * time.Millisecond):
	}
	release()
	<-chartWaits
	if err != nil {
		t.Fatal(err)
	}
	chartRelease()
}

// TestTurnsGrace: a chart run still in flight after the grace (hung on its fault)
// is not waited for, nor cut; new chart runs still wait.
func TestTurnsGrace(t *testing.T) {
	turns := Turns{Grace: 10 * time.Millisecond}
	ctx := context.Background()
	hung, err := turns.Chart(ctx)
	if err != nil {
		t.Fatal(err)
	}
	release, err := turns.Graded(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if returns(func() { r, _ := turns.Chart(ctx); r() }) {
		t.Error("a chart run started while a graded run held the host")
	}
	release()
	hung()
}

// TestTurnsPatience: a chart run that has waited Patience starts beside the graded
// runs: other labs' gradings cannot starve a lab of its evidence.
func TestTurnsPatience(t *testing.T) {
	turns := Turns{Patience: 10 * time.Millisecond}
	release, err := turns.Graded(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if !returns(func() { r, _ := turns.Chart(context.Background()); r() }) {
		t.Error("a chart run still waits after its patience")
	}
}

// TestTurnsCancelled: a wait ends with its context's cause, and a graded run that
// gave up waiting lets the chart runs it held back go.
func TestTurnsCancelled(t *testing.T) {
	var turns Turns
	hold, err := turns.Graded(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	stop := errors.New("lab stopped")
	for name, wait := range map[string]func(context.Context) error{
		"graded": func(ctx context.Context) error { _, err := turns.Graded(ctx); return err },
		"chart":  func(ctx context.Context) error { _, err := turns.Chart(ctx); return err },
	} {
		ctx, cancel := context.WithCancelCause(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- wait(ctx) }()
		cancel(stop)
		select {
		case err := <-errc:
			if !errors.Is(err, stop) {
				t.Errorf("%s: err = %v, want the context's cause", name, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: still waiting after its context ended", name)
		}
	}
	hold()

	// A graded run waits on a chart run; it gives up; a new chart run may start.
	releaseChart, err := turns.Chart(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := turns.Graded(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("graded run waiting on a chart run: err = %v, want its deadline", err)
	}
	if !returns(func() { r, _ := turns.Chart(context.Background()); r() }) {
		t.Error("a chart run is held back by a graded run that gave up")
	}
	releaseChart()
}

// TestTurnsNil: a nil *Turns (labs whose workloads run elsewhere) holds nothing back.
func TestTurnsNil(t *testing.T) {
	var turns *Turns
	ctx := context.Background()
	release, err := turns.Graded(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !returns(func() { r, _ := turns.Graded(ctx); r() }) {
		t.Error("a nil Turns held a graded run back")
	}
	chartRelease, err := turns.Chart(ctx)
	if err != nil {
		t.Fatal(err)
	}
	chartRelease()
	release()
}

// TestLabsTakeTurns: two labs on one host. A graded run in one (an instructor's
// "measure now") waits for the other's chart run in flight and runs alone.
func TestLabsTakeTurns(t *testing.T) {
	var turns Turns
	var mu sync.Mutex
	charting, charted := 0, 0
	other := &fakeHost{workload: func(ctx context.Context, n int) (float64, error) {
		if n <= 2 {
			return healthyThenFaulted(ctx, n) // the baseline and the self-test
		}
		mu.Lock()
		charting++
		mu.Unlock()
		time.Sleep(100 * time.Millisecond)
		mu.Lock()
		charting--
		charted++
		mu.Unlock()
		return 1, nil
	}}
	besideChart := -1
	measured := &fakeHost{workload: func(ctx context.Context, n int) (float64, error) {
		if n <= 2 {
			return healthyThenFaulted(ctx, n)
		}
		mu.Lock()
		defer mu.Unlock()
		besideChart = charting
		return 1, nil
	}}
	start := func(h *fakeHost, stream bool) *Lab {
		l := Start(context.Background(), Config{Provider: h, Faults: h, DataDir: t.TempDir(), TTL: time.Hour,
			NoStream: !stream, Turns: &turns, Log: quiet}, 1, testVariant(t))
		t.Cleanup(func() { l.Stop(); l.Wait() })
		return l
	}
	l := start(measured, false)
	waitFor(t, l, func(st Status) bool { return st.Confirmed }) // its self-test is done
	start(other, true)
	until(t, &turns, func() bool { return turns.charts == 1 })
	if _, err := l.Measure(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if besideChart != 0 || charted == 0 {
		t.Errorf("a graded run ran beside %d chart runs of another lab (%d charted), want alone after one", besideChart, charted)
	}
}

// TestTurnsCharts: no more than Charts streaming runs at once, even once their
// patience is spent; one ending lets the next start; a lab's start is not held back.
func TestTurnsCharts(t *testing.T) {
	turns := Turns{Charts: 2, Patience: 10 * time.Millisecond}
	ctx := context.Background()
	var running []func()
	for range 2 {
		r, err := turns.Stream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		running = append(running, r)
	}
	third := make(chan func(), 1)
	if !returns(func() { r, _ := turns.Chart(ctx); r() }) {
		t.Error("a lab's start waited for the streaming runs' limit")
	}
	go func() { r, _ := turns.Stream(ctx); third <- r }()
	select {
	case r := <-third:
		r()
		t.Fatal("a third chart run started beside two, past the limit")
	case <-time.After(100 * time.Millisecond): // ten times its patience
	}
	running[0]()
	(<-third)()
	running[1]()
	if got := HostCharts(); got < 1 {
		t.Errorf("HostCharts() = %d, want at least 1", got)
	}
}
