package walkthrough

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/injector"
	"github.com/commlab/commlab/labs/backend"
	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/labs/topology"
	"github.com/commlab/commlab/scenarios"

	"github.com/commlab/commlab/internal/testenv"
)

// scenario is a namespace lab (no workload, so no commlab binary is needed) whose
// solution cites the tbf line on the throttled node. The rate drawn decides what the
// grader wants to see; the wrong-node variant cites the healthy node.
const scenario = `id: walk-rate
chapter: ch08
title: 一条数据网卡被限速
environment:
  topology: 2x1
params:
  rate:
    choose: ["70"]
faults:
  - kind: nic-rate
    node: node2
    params:
      nic: rdma0
      rate: ${rate}mbit
task: 找出被限速的网卡。
diagnosis:
  class: nic-rate-limited
  location:
    node: node2
    nic: rdma0
evidence:
  - id: tbf
    node: node2
    command: '^tc\b.*\bqdisc\b'
    output: 'qdisc tbf \S+ root .*rate ${rate}Mbit'
debrief: node2 的 rdma0 限速 ${rate}Mbit/s。
solution:
  - node: node1
    run: tc -s qdisc show dev rdma0
  - node: NODE
    run: tc -s qdisc show dev rdma0
    cite: true
`

// TestRun walks a real namespace lab twice: citing the right node earns the evidence,
// citing the healthy one does not; both leave nothing in the journal.
func TestRun(t *testing.T) {
	testenv.RequireRoot(t, "lab sandboxes")
	reg, err := injector.NewRegistry(injector.Builtin()...)
	if err != nil {
		t.Fatal(err)
	}
	opts := scenarios.Options{
		Topology: func(name string) ([]string, []string, bool) {
			tp, err := topology.Builtin(name)
			if err != nil {
				return nil, nil, false
			}
			return tp.NodeNames(), []string{"eth0", "rdma0"}, true
		},
		CheckFault:    func(kind string, p map[string]string) error { _, err := reg.Parse(kind, p); return err },
		ChapterExists: func(string) bool { return true },
	}
	for _, tt := range []struct {
		cite     string
		evidence bool
	}{{"node2", true}, {"node1", false}} {
		sc, probs := scenarios.Parse("walk.yaml", []byte(strings.Replace(scenario, "NODE", tt.cite, 1)), opts)
		if len(probs) > 0 {
			t.Fatal(probs)
		}
		data := t.TempDir()
		log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		inj, err := backend.OpenInjector(injector.Options{DataDir: data, Logger: log, Registry: reg})
		if err != nil {
			t.Fatal(err)
		}
		cfg := session.Config{Provider: backend.Local{DataDir: data, Log: log}, Faults: backend.Faults{In: inj},
			DataDir: data, TTL: 5 * time.Minute, Log: log}
		rep, err := Run(context.Background(), cfg, sc.Draw(1), Timeouts{})
		if err != nil {
			t.Fatalf("cite %s: %v", tt.cite, err)
		}
		if len(rep.Steps) != 2 || strings.Contains(rep.Steps[1].Output, "rate 70Mbit") != tt.evidence {
			t.Errorf("cite %s: steps %+v", tt.cite, rep.Steps)
		}
		earned := -1.0
		for _, c := range rep.Result.Criteria {
			if c.Name == "evidence" {
				earned = c.Earned
			}
		}
		if (earned > 0) != tt.evidence || tt.evidence && !rep.Result.Passed {
			t.Errorf("cite %s: evidence earned %.2f, passed %v: %+v", tt.cite, earned, rep.Result.Passed, rep.Result)
		}
		if left, _ := inj.List(); len(left) > 0 {
			t.Errorf("cite %s: faults left in the journal: %+v", tt.cite, left)
		}
	}
}

// TestFigureAfterFault: the healthy baseline before the fault mark is never the
// figure "with the fault"; the last run after the mark is.
func TestFigureAfterFault(t *testing.T) {
	s := func(bw float64) session.Sample { return session.Sample{Type: "sample", BusBW: bw} }
	mark := session.Sample{Type: "event", Label: session.FaultEvent}
	for _, c := range []struct {
		name    string
		list    []session.Sample
		before  bool
		want    float64
		faulted bool
	}{
		{"baseline only", []session.Sample{s(7.3)}, false, -1, false},
		{"mark, no run yet", []session.Sample{s(7.3), mark}, false, -1, true},
		{"runs after the mark", []session.Sample{s(7.3), mark, s(1.2), s(0.9)}, false, 0.9, true},
		{"a failed run measures zero", []session.Sample{s(7.3), mark, s(0)}, false, 0, true},
		{"a run arriving after the mark was seen", []session.Sample{s(1.1)}, true, 1.1, true},
		{"a run before any mark", []session.Sample{s(1.1)}, false, -1, false},
	} {
		got, faulted := figureAfterFault(c.list, c.before)
		if got != c.want || faulted != c.faulted {
			t.Errorf("%s: got %v, %v; want %v, %v", c.name, got, faulted, c.want, c.faulted)
		}
	}
}
