//go:build linux

package backend

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/commlab/commlab/internal/testenv"
	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/labs/topology"
	"github.com/commlab/commlab/scenarios"
)

// BenchmarkGradedRunPriority measures what a graded run's CPU priority
// (session.Prioritizer) is worth: ch17's workload (an all_reduce of 4 MB over four
// nodes) in one 4x2 sandbox, alone, then beside a second sandbox that runs the same
// workload back to back (another lab's chart), at equal weight and with the first
// prioritized, side by side in one run. It prints each case's median busbw and its
// ratio to alone (docs/load.md quotes a run); the grader's bar for that lab is 0.70.
func BenchmarkGradedRunPriority(b *testing.B) {
	testenv.RequireRoot(b, "network namespaces and cgroups")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	exe := testenv.Commlab(b)
	up := func() *netnsEnv {
		env, err := Local{DataDir: b.TempDir(), Exe: exe, Log: slog.New(slog.DiscardHandler)}.Up(ctx,
			scenarios.Environment{Kind: "netns", Topology: "4x2"}, 15*time.Minute, func(session.Progress) {})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = env.Down(context.Background()) })
		return env.(*netnsEnv)
	}
	measured, neighbour := up(), up()
	cat, probs := scenarios.Load(scenarios.Embedded(), scenarios.CatalogDir, scenarios.Options{Topology: topology.BuiltinNodesAndNICs})
	if len(probs) > 0 {
		b.Fatal(probs)
	}
	sc, ok := cat.Get("ch17-rail-degraded")
	if !ok {
		b.Fatal("no scenario ch17-rail-degraded")
	}
	w := sc.Workload
	median := func(prioritize bool) float64 {
		var bws []float64
		for range 5 {
			restore := func() error { return nil }
			if prioritize {
				var err error
				if restore, err = measured.Prioritize(); err != nil {
					b.Fatal(err)
				}
			}
			bw, err := measured.Workload(ctx, w, nil, io.Discard)
			if err := restore(); err != nil {
				b.Fatal(err)
			}
			if err != nil {
				b.Fatal(err)
			}
			bws = append(bws, bw)
		}
		slices.Sort(bws)
		return bws[len(bws)/2]
	}
	for range b.N {
		alone := median(false)
		chart, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { // the neighbour's chart, back to back
			defer close(done)
			for chart.Err() == nil {
				_, _ = neighbour.Workload(chart, w, nil, io.Discard)
			}
		}()
		time.Sleep(time.Second)
		shared := median(false)
		first := median(true)
		stop()
		<-done
		fmt.Printf("%-44s %12s %10s\n", "ch17's workload in one 4x2 sandbox", "busbw GB/s", "of alone")
		for _, r := range []struct {
			name string
			bw   float64
		}{{"alone", alone}, {"beside another lab's workload", shared}, {"beside it, prioritized (weight 10000)", first}} {
			fmt.Printf("%-44s %12.4f %10.2f\n", r.name, r.bw, r.bw/alone)
		}
		b.ReportMetric(shared/alone, "shared/alone")
		b.ReportMetric(first/alone, "prioritized/alone")
	}
}
