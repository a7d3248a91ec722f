//go:build linux

package backend

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/commlab/commlab/injector"
	"github.com/commlab/commlab/internal/testenv"
	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/labs/topology"
	"github.com/commlab/commlab/scenarios"
)

// helperFaults is a lab whose faults run helper processes started with their
// deadline: a nic-flap driver and congestion's iperf3 flows.
const helperFaults = `id: t-helpers
chapter: ch12
title: t
environment: {kind: netns, topology: 2x1}
faults:
  - {kind: nic-flap, node: node2, params: {nic: rdma0, period: 20s, duty: 10%}}
  - {kind: congestion, node: node2, params: {nic: eth0, senders: node1, rate: 1mbit, proto: udp}}
task: t
diagnosis: {class: nic-flapping, location: {node: node2, nic: rdma0}}
evidence:
  - {id: link, node: node2, command: '^ip\b', output: 'DOWN'}
hints:
  - {text: h, cost: 0.1}
debrief: d
`

// TestExtendAppliesHelpersAgain: on this host, extending a lab whose faults run
// helpers with their own deadline applies each again at once, for the new end: the
// journal then holds two new faults of the same kinds whose deadlines are the
// lab's new end, the old ones are gone, and the lab's end reverts the new ones.
func TestExtendAppliesHelpersAgain(t *testing.T) {
	testenv.RequireRoot(t, "network namespaces")
	sc, probs := scenarios.Parse("t.yaml", []byte(helperFaults), scenarios.Options{Topology: func(name string) ([]string, []string, bool) {
		tp, err := topology.Builtin(name)
		if err != nil {
			return nil, nil, false
		}
		return tp.NodeNames(), []string{"eth0", "rdma0"}, true
	}})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	data := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	in, err := OpenInjector(injector.Options{DataDir: data, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	l := session.Start(context.Background(), session.Config{Provider: Local{DataDir: data, Exe: "/bin/true", Log: log}, Faults: Faults{In: in},
		DataDir: data, TTL: 5 * time.Minute, NoStream: true, Log: log}, 1, sc.Draw(1))
	defer func() { l.Stop(); l.Wait() }()
	select {
	case <-l.Up():
	case <-l.Ended():
		t.Fatalf("the lab ended: %+v", l.Status())
	case <-time.After(2 * time.Minute):
		t.Fatalf("the lab is not up: %+v", l.Status())
	}
	before, err := in.List()
	if err != nil || len(before) != 2 {
		t.Fatalf("journal before: %+v, %v", before, err)
	}
	end, err := l.Extend(context.Background(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	after, err := in.List()
	if err != nil || len(after) != 2 {
		t.Fatalf("journal after: %+v, %v", after, err)
	}
	for i, e := range after {
		if e.ID == before[i].ID || e.Kind != before[i].Kind || !e.Applied {
			t.Errorf("fault %d after the extension: %s %s (applied %v), before %s %s", i, e.ID, e.Kind, e.Applied, before[i].ID, before[i].Kind)
		}
		if d := e.Deadline.Sub(end); d < -5*time.Second || d > 5*time.Second {
			t.Errorf("%s's deadline is %s from the lab's new end", e.Kind, d)
		}
	}
	if !l.Running() {
		t.Errorf("the lab does not run after the extension: %+v", l.Status())
	}
	l.Stop()
	l.Wait()
	if left, err := in.List(); err != nil || len(left) != 0 {
		t.Errorf("faults left after the lab: %+v, %v", left, err)
	}
}
