package web_test

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/commlab/commlab/injector"
	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/labs/topology"
	"github.com/commlab/commlab/scenarios"
)

// fakeLabHost stands in for the lab host where a test walks what the server
// does around labs (an exam's tasks), not the sandboxes: environments come up
// at once with the scenario's nodes and shells that echo, faults apply as
// nothing, and the workload measures 1 GB/s, 0.1 with the fault (its second
// run) and 1 after, so a fix re-measured counts. Real labs: labServer.
type fakeLabHost struct{}

func (fakeLabHost) Up(ctx context.Context, env scenarios.Environment, ttl time.Duration, progress func(session.Progress)) (session.Env, error) {
	nodes := []string{"node1"}
	if t, err := topology.Builtin(env.Topology); err == nil {
		nodes = t.NodeNames()
	}
	return &fakeLabEnv{nodes: nodes}, nil
}
func (fakeLabHost) Check(scenarios.Environment) error { return nil }
func (fakeLabHost) Apply(ctx context.Context, t injector.Target, kind string, params map[string]string, ttl time.Duration) (string, string, error) {
	return "fake-" + kind, "true", nil
}
func (fakeLabHost) Revert(context.Context, string) error   { return nil }
func (fakeLabHost) Supports(context.Context, string) error { return nil }
func (fakeLabHost) ChangesLogin(string) bool               { return false }

type fakeLabEnv struct {
	mu    sync.Mutex
	nodes []string
	runs  int
}

func (e *fakeLabEnv) ID() string                    { return "fake" }
func (e *fakeLabEnv) Nodes() []string               { return e.nodes }
func (e *fakeLabEnv) Target(string) injector.Target { return injector.Target{} }
func (e *fakeLabEnv) Down(context.Context) error    { return nil }
func (e *fakeLabEnv) Shell(context.Context, string, string) (session.PTY, error) {
	r, w := io.Pipe()
	return &echoPTY{r, w}, nil
}
func (e *fakeLabEnv) Workload(context.Context, *scenarios.Workload, []string, io.Writer) (float64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.runs++
	if e.runs == 2 {
		return 0.1, nil
	}
	return 1, nil
}

type echoPTY struct {
	r *io.PipeReader
	w *io.PipeWriter
}

func (p *echoPTY) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p *echoPTY) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p *echoPTY) Resize(uint16, uint16) error { return nil }
func (p *echoPTY) Close() error                { p.w.Close(); return p.r.Close() }
