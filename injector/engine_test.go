package injector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// The engine (journal-first ordering, conflicts, partial-apply revert, sweep) is
// tested here without root: a fake kind changes a map instead of the host, and
// the injector's target resolution is replaced so no namespace is needed.

// fakeHost is the "host" fake faults change: object -> value, plus an event log.
type fakeHost struct {
	mu     sync.Mutex
	state  map[string]string
	events []string
}

var fakeHosts sync.Map // test name -> *fakeHost; undos find theirs after a JSON round trip

func hostFor(name string) *fakeHost {
	h, _ := fakeHosts.LoadOrStore(name, &fakeHost{state: map[string]string{}})
	return h.(*fakeHost)
}

func (h *fakeHost) log(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, fmt.Sprintf(format, args...))
}

func (h *fakeHost) get(k string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state[k]
}

func (h *fakeHost) set(k, v string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if v == "" {
		delete(h.state, k)
	} else {
		h.state[k] = v
	}
}

// fakeFault sets Objects to "on". Fail picks a failure point: "before-record",
// "after-first" (one object changed, then an error), "no-record" (a bug), or ""
// for none. Claim is the exclusive resource it claims.
type fakeFault struct {
	Host    string `json:"host" param:"host,required" doc:"fake host"`
	Objects string `json:"objects" param:"objects,required" doc:"comma-separated objects"`
	Claim   string `json:"claim" param:"claim" doc:"exclusive claim"`
	Fail    string `json:"fail" param:"fail" doc:"failure point"`
	// RevertFails makes the undo fail (its first Revert only when "once").
	RevertFails string `json:"revert_fails" param:"revert_fails" doc:"once or always"`

	in *Injector // to look at the journal from inside Apply
}

func (f *fakeFault) Kind() string { return "fake" }

func (f *fakeFault) Validate() error {
	if f.Objects == "" {
		return invalid("fake: no objects")
	}
	return nil
}

func (f *fakeFault) Command(Target) []string { return []string{"fake " + f.Objects} }

func (f *fakeFault) claims() []string {
	if f.Claim == "" {
		return nil
	}
	return []string{f.Claim}
}

func (f *fakeFault) Apply(ctx context.Context, t Target, op *Op) (Undo, error) {
	h := hostFor(f.Host)
	if f.Fail == "before-record" {
		return nil, errors.New("cannot read the prior state")
	}
	u := &fakeUndo{Host: f.Host, FailMode: f.RevertFails}
	objs := strings.Split(f.Objects, ",")
	for _, o := range objs {
		u.Prior = append(u.Prior, [2]string{o, h.get(o)})
	}
	if f.Fail != "no-record" {
		if err := op.Record(u); err != nil {
			return nil, err
		}
		// Journal first: the entry is on disk before the host changes.
		if es, _ := f.in.List(); len(es) == 0 || es[len(es)-1].ID != op.ID || es[len(es)-1].Applied {
			h.log("host changed before %s was journaled", op.ID)
		}
	}
	for i, o := range objs {
		h.set(o, "on")
		h.log("set %s", o)
		if f.Fail == "after-first" && i == 0 {
			return u, errors.New("second object refused")
		}
	}
	return u, ctx.Err()
}

type fakeUndo struct {
	Host     string      `json:"host"`
	Prior    [][2]string `json:"prior"`
	FailMode string      `json:"fail_mode"`
}

// revertTries counts Revert calls per fake host across JSON round trips.
var revertTries sync.Map

func (u *fakeUndo) Revert(context.Context) error {
	h := hostFor(u.Host)
	n, _ := revertTries.LoadOrStore(u.Host, new(int))
	*n.(*int)++
	if u.FailMode == "always" || (u.FailMode == "once" && *n.(*int) == 1) {
		h.log("revert failed")
		return errors.New("device busy")
	}
	for i := len(u.Prior) - 1; i >= 0; i-- {
		h.set(u.Prior[i][0], u.Prior[i][1])
		h.log("restore %s", u.Prior[i][0])
	}
	return nil
}

func fakeKind(in **Injector) Kind {
	return Kind{Name: "fake", Summary: "test double",
		New:     func() Fault { return &fakeFault{in: *in} },
		NewUndo: func() Undo { return &fakeUndo{} }}
}

// newFakeInjector opens an injector on dir whose targets resolve without a host.
func newFakeInjector(t *testing.T, dir string) *Injector {
	t.Helper()
	var in *Injector
	reg, err := NewRegistry(fakeKind(&in))
	if err != nil {
		t.Fatal(err)
	}
	in, err = Open(Options{DataDir: dir, Registry: reg, Features: &Features{}, Helper: []string{"/bin/false"},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	in.resolve = func(t Target) (Target, error) {
		if err := t.Validate(); err != nil {
			return t, err
		}
		t.NetNSInode, t.BootID = 4026531999, bootID()
		return t, nil
	}
	return in
}

func applyFake(t *testing.T, in *Injector, params map[string]string) (Entry, error) {
	t.Helper()
	f, err := in.Registry().Parse("fake", params)
	if err != nil {
		t.Fatal(err)
	}
	return in.Apply(context.Background(), Target{Sandbox: "fake1", Node: "n1"}, f, time.Minute)
}

func TestEngine(t *testing.T) {
	tests := []struct {
		name       string
		params     map[string]string
		wantErr    string   // "" for success
		wantState  string   // a=...,b=... after Apply
		wantLive   int      // journaled entries after Apply
		wantEvents []string // in order
	}{
		{name: "applies after journaling", params: map[string]string{"objects": "a,b"},
			wantState: "a=on,b=on", wantLive: 1, wantEvents: []string{"set a", "set b"}},
		{name: "error before recording leaves nothing", params: map[string]string{"objects": "a,b", "fail": "before-record"},
			wantErr: "cannot read the prior state", wantState: "a=,b=", wantLive: 0},
		{name: "partial apply is reverted in reverse order", params: map[string]string{"objects": "a,b", "fail": "after-first"},
			wantErr: "second object refused", wantState: "a=,b=", wantLive: 0,
			wantEvents: []string{"set a", "restore b", "restore a"}},
		{name: "failed revert of a partial apply stays for the sweep", params: map[string]string{"objects": "a,b", "fail": "after-first", "revert_fails": "once"},
			wantErr: "stays journaled for the sweep", wantState: "a=on,b=", wantLive: 1,
			wantEvents: []string{"set a", "revert failed"}},
		{name: "a kind that journals nothing is a bug", params: map[string]string{"objects": "a", "fail": "no-record"},
			wantErr: "did not journal an undo (bug)", wantState: "a=on", wantLive: 0, wantEvents: []string{"set a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			in := newFakeInjector(t, dir)
			hostName := t.Name()
			tt.params["host"] = hostName
			h := hostFor(hostName)
			_, err := applyFake(t, in, tt.params)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Apply: %v, want error %q", err, tt.wantErr)
			}
			var st []string
			for _, o := range strings.Split(tt.params["objects"], ",") {
				st = append(st, o+"="+h.get(o))
			}
			if got := strings.Join(st, ","); got != tt.wantState {
				t.Errorf("state %s, want %s", got, tt.wantState)
			}
			live, _ := in.List()
			if len(live) != tt.wantLive {
				t.Errorf("%d journaled entries, want %d", len(live), tt.wantLive)
			}
			if got, want := strings.Join(h.events, "; "), strings.Join(tt.wantEvents, "; "); got != want {
				t.Errorf("events %q, want %q", got, want)
			}
			// Whatever is left, a sweep from a fresh process puts the host back.
			again := newFakeInjector(t, dir)
			if _, err := again.Sweep(context.Background()); err != nil {
				t.Fatalf("sweep: %v", err)
			}
			if live, _ := again.List(); len(live) != 0 {
				t.Errorf("after sweep: %d entries", len(live))
			}
			if tt.params["fail"] != "no-record" {
				for _, o := range strings.Split(tt.params["objects"], ",") {
					if v := h.get(o); v != "" {
						t.Errorf("after sweep %s=%s", o, v)
					}
				}
			}
		})
	}
}

// TestEngineConflict: a fault claiming what an active fault on the same node holds
// is refused before its kind touches the host; once reverted, it applies.
func TestEngineConflict(t *testing.T) {
	in := newFakeInjector(t, t.TempDir())
	h := hostFor(t.Name())
	first, err := applyFake(t, in, map[string]string{"host": t.Name(), "objects": "a", "claim": "qdisc:rdma0"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = applyFake(t, in, map[string]string{"host": t.Name(), "objects": "b", "claim": "qdisc:rdma0"})
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), first.ID) {
		t.Fatalf("second claim: %v, want ErrConflict naming %s", err, first.ID)
	}
	if h.get("b") != "" {
		t.Error("the refused fault changed the host")
	}
	if _, err := applyFake(t, in, map[string]string{"host": t.Name(), "objects": "c", "claim": "mtu:rdma0"}); err != nil {
		t.Errorf("other claim: %v", err)
	}
	if err := in.Revert(context.Background(), first.ID); err != nil {
		t.Fatal(err)
	}
	if h.get("a") != "" {
		t.Error("revert left a set")
	}
	if _, err := applyFake(t, in, map[string]string{"host": t.Name(), "objects": "b", "claim": "qdisc:rdma0"}); err != nil {
		t.Errorf("claim after revert: %v", err)
	}
	if err := in.Revert(context.Background(), first.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("second revert of %s: %v, want ErrNotFound", first.ID, err)
	}
	if strings.Contains(strings.Join(h.events, ";"), "before") {
		t.Errorf("journal-first broken: %v", h.events)
	}
}
