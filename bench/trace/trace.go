// Package trace records what each rank of a commlab bench run did and when, and
// writes it as Chrome trace JSON (the Trace Event Format), which Perfetto and
// chrome://tracing open: one process per node, one thread per rank, one slice
// per collective call, so a straggler rank stands out.
package trace

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"
)

// Event is one complete slice ("ph":"X") on a rank's timeline.
type Event struct {
	Track string         `json:"-"` // "": the rank's own thread; else a thread of its own (e.g. "compute")
	Name  string         `json:"name"`
	Cat   string         `json:"cat,omitempty"`
	Start time.Time      `json:"-"`
	Dur   time.Duration  `json:"-"`
	Args  map[string]any `json:"args,omitempty"`
}

// Recorder collects one rank's events; safe for concurrent use.
type Recorder struct {
	mu     sync.Mutex
	events []Event
	limit  int
}

// NewRecorder keeps at most limit events (older ones first); 0 means 100000.
func NewRecorder(limit int) *Recorder {
	if limit <= 0 {
		limit = 100000
	}
	return &Recorder{limit: limit}
}

// Add records an event that started at start and lasted until now.
func (r *Recorder) Add(name, cat string, start time.Time, args map[string]any) {
	r.AddOn("", name, cat, start, args)
}

// AddOn records an event on one of the rank's tracks: work that overlaps the
// rank's collective calls (a backward pass) gets a thread of its own, as a
// profiler shows a GPU's compute and communication streams as separate rows.
func (r *Recorder) AddOn(track, name, cat string, start time.Time, args map[string]any) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.events) >= r.limit {
		return
	}
	r.events = append(r.events, Event{Track: track, Name: name, Cat: cat, Start: start, Dur: time.Since(start), Args: args})
}

// Events returns a copy of the recorded events.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// wire is the form a rank sends to rank 0.
type wire struct {
	Track string         `json:"k,omitempty"`
	Name  string         `json:"n"`
	Cat   string         `json:"c,omitempty"`
	TS    int64          `json:"t"` // µs since the Unix epoch
	Dur   int64          `json:"d"` // µs
	Args  map[string]any `json:"a,omitempty"`
}

// Marshal encodes a rank's events for transfer.
func Marshal(evs []Event) ([]byte, error) {
	w := make([]wire, len(evs))
	for i, e := range evs {
		w[i] = wire{e.Track, e.Name, e.Cat, e.Start.UnixMicro(), e.Dur.Microseconds(), e.Args}
	}
	return json.Marshal(w)
}

// Unmarshal decodes Marshal's form.
func Unmarshal(b []byte) ([]Event, error) {
	var w []wire
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("decode trace events: %w", err)
	}
	evs := make([]Event, len(w))
	for i, e := range w {
		evs[i] = Event{Track: e.Track, Name: e.Name, Cat: e.Cat, Start: time.UnixMicro(e.TS), Dur: time.Duration(e.Dur) * time.Microsecond, Args: e.Args}
	}
	return evs, nil
}

// Rank is one rank's timeline and where it ran.
type Rank struct {
	Rank   int
	Node   string
	Events []Event
}

type chromeEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	TS   float64        `json:"ts"`
	Dur  float64        `json:"dur,omitempty"`
	PID  int            `json:"pid"`
	TID  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

// WriteChrome writes the ranks' timelines as Chrome trace JSON. Timestamps are
// relative to the earliest event. A rank's thread id is its rank; its named tracks
// get 1000×k + rank (k = 1, 2, ... in the order the tracks first appear), named
// "rank N <track>".
func WriteChrome(w io.Writer, ranks []Rank) error {
	nodes := map[string]int{}
	var names []string
	for _, r := range ranks {
		if _, ok := nodes[r.Node]; !ok {
			nodes[r.Node] = 0
			names = append(names, r.Node)
		}
	}
	sort.Strings(names)
	for i, n := range names {
		nodes[n] = i + 1
	}
	var t0 time.Time
	for _, r := range ranks {
		for _, e := range r.Events {
			if t0.IsZero() || e.Start.Before(t0) {
				t0 = e.Start
			}
		}
	}
	tracks := map[string]int{"": 0}
	for _, r := range ranks {
		for _, e := range r.Events {
			if _, ok := tracks[e.Track]; !ok {
				tracks[e.Track] = len(tracks)
			}
		}
	}
	out := []chromeEvent{}
	for _, n := range names {
		out = append(out, chromeEvent{Name: "process_name", Ph: "M", PID: nodes[n], Args: map[string]any{"name": n}})
	}
	for _, r := range ranks {
		pid := nodes[r.Node]
		out = append(out, chromeEvent{Name: "thread_name", Ph: "M", PID: pid, TID: r.Rank, Args: map[string]any{"name": fmt.Sprintf("rank %d", r.Rank)}})
		named := map[string]bool{}
		for _, e := range r.Events {
			tid := 1000*tracks[e.Track] + r.Rank
			if e.Track != "" && !named[e.Track] {
				named[e.Track] = true
				out = append(out, chromeEvent{Name: "thread_name", Ph: "M", PID: pid, TID: tid, Args: map[string]any{"name": fmt.Sprintf("rank %d %s", r.Rank, e.Track)}})
			}
			out = append(out, chromeEvent{
				Name: e.Name, Cat: e.Cat, Ph: "X",
				TS:  float64(e.Start.Sub(t0).Nanoseconds()) / 1e3,
				Dur: float64(e.Dur.Nanoseconds()) / 1e3,
				PID: pid, TID: tid, Args: e.Args,
			})
		}
	}
	enc := json.NewEncoder(w)
	return enc.Encode(map[string]any{"traceEvents": out, "displayTimeUnit": "ms", "otherData": map[string]string{"producer": "commlab bench (NCCL emulation)"}})
}
