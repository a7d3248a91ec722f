//go:build linux

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/commlab/commlab/injector"
)

// callTimes runs all_reduce from 8 B to 4 KiB (4 sizes, 40 timed calls each,
// out of place and in place) between n1 and n2, one rank each, and returns the
// duration of every timed call on every rank, in µs, from the run's trace (each
// call's own time: a host stall then spoils one call, not a row's mean).
func (l testLab) callTimes(t *testing.T) []float64 {
	t.Helper()
	o := netnsOpts(8, 40, "n1:1,n2:1")
	o.MaxBytes, o.StepFactor, o.Warmup = 4<<10, 8, 5
	o.Trace = filepath.Join(t.TempDir(), "trace.json")
	if out, errOut, err := l.bench(t, o); err != nil {
		t.Fatalf("bench: %v\n%s\n%s", err, errOut, out)
	}
	b, err := os.ReadFile(o.Trace)
	if err != nil {
		t.Fatal(err)
	}
	var tr struct {
		TraceEvents []struct {
			Cat string  `json:"cat"`
			Dur float64 `json:"dur"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(b, &tr); err != nil {
		t.Fatalf("trace: %v", err)
	}
	var us []float64
	for _, e := range tr.TraceEvents {
		if e.Cat == "out-of-place" || e.Cat == "in-place" {
			us = append(us, e.Dur)
		}
	}
	if want := 2 * 4 * 2 * o.Iters; len(us) != want {
		t.Fatalf("trace has %d timed calls, want %d", len(us), want)
	}
	return us
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// callTimesWith measures callTimes without a fault and with each delay on n1's
// rdma0 (e.g. "10us", "2ms"), in alternating rounds so all see the same load,
// and returns the median call time (µs) of each: none first, then delays' order.
func callTimesWith(t *testing.T, l testLab, in *injector.Injector, rounds int, delays ...string) []float64 {
	t.Helper()
	times := make([][]float64, 1+len(delays))
	for range rounds {
		times[0] = append(times[0], l.callTimes(t)...)
		for i, d := range delays {
			f, err := in.Registry().Parse("delay", map[string]string{"nic": "rdma0", "delay": d})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			e, err := in.Apply(ctx, injector.Target{Sandbox: l.ID, Node: "n1"}, f, 5*time.Minute)
			if err != nil {
				cancel()
				t.Fatalf("apply delay %s: %v", d, err)
			}
			times[i+1] = append(times[i+1], l.callTimes(t)...)
			err = in.Revert(ctx, e.ID)
			cancel()
			if err != nil {
				t.Fatalf("revert: %v", err)
			}
		}
	}
	p50 := make([]float64, len(times))
	for i, v := range times {
		p50[i] = median(v)
	}
	return p50
}

// testInjector opens an injector with every built-in kind on a scratch journal,
// swept when the test ends, or skips t where this host cannot apply kind.
func testInjector(t *testing.T, kind string) *injector.Injector {
	t.Helper()
	reg, err := injector.NewRegistry(injector.Builtin()...)
	if err != nil {
		t.Fatal(err)
	}
	in, err := injector.Open(injector.Options{DataDir: t.TempDir(), Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Sweep(context.Background()) })
	if err := in.Supports(context.Background(), kind); err != nil {
		t.Skipf("%s: %v", kind, err)
	}
	return in
}

// TestNetnsDelayCallTime: a one-way delay d on n1's rdma0 adds d to each small
// all_reduce call of 2 ranks (within 10 %, medians of every call's own time), on
// top of what the delay's mechanism costs at any d (measured with 10us beside
// it: on the userspace wire, a relay through a helper thread and the wake-ups it
// implies, 0.2-0.3 ms at load 10-15 on 2 vCPUs). Why one d per call: a call is,
// per channel, a ring reduce-scatter step and an all-gather step (chain in
// coll.go); a rank sends its all-gather chunk once it holds its peer's
// reduce-scatter chunk, and a send returns once its bytes are in the queue pair's
// ring (transport/ib.go), without waiting for the ACK, so each call's critical
// path crosses each direction once: n1 to n2 (d) and back.
// The timed calls follow each other without a barrier, so the delays add up.
func TestNetnsDelayCallTime(t *testing.T) {
	l := newTestLab(t)
	in := testInjector(t, "delay")
	p50 := callTimesWith(t, l, in, 3, "10us", "2ms")
	added := (p50[2] - p50[1]) / 1000
	t.Logf("all_reduce 8 B-4 KiB, 2 ranks: median call %.0f µs without, %.0f µs with delay 10us, %.0f µs with 2ms: 2ms adds %.3f ms beside 10us, %.3f ms beside none",
		p50[0], p50[1], p50[2], added, (p50[2]-p50[0])/1000)
	if want := 1.99; math.Abs(added-want) > 0.1*want {
		t.Errorf("delay 2ms added %.3f ms to the median small all_reduce call beside delay 10us, more than 10%% off %.2f ms (one one-way delay)", added, want)
	}
}

// TestNetnsDelayBench prints make bench's table of asked vs added delay as
// commlab bench sees it (scripts/bench-injector.sh runs it after the ping table).
func TestNetnsDelayBench(t *testing.T) {
	if os.Getenv("COMMLAB_INJECTOR_BENCH") != "1" {
		t.Skip("set COMMLAB_INJECTOR_BENCH=1 (scripts/bench-injector.sh)")
	}
	l := newTestLab(t)
	in := testInjector(t, "delay")
	fmt.Printf("\n### delay as commlab bench sees it (%s; all_reduce 8 B-4 KiB, ranks on n1 and n2, delay on n1's rdma0; medians of every timed call, 3 alternating rounds of 320)\n\n",
		injector.Mechanism("delay", injector.Probe(context.Background())))
	fmt.Println("| asked | call p50 without | with 10us | with asked | added (vs without) | added (vs 10us) | error (vs 10us) |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|")
	for _, d := range []float64{1, 2, 5} {
		p50 := callTimesWith(t, l, in, 3, "10us", fmt.Sprintf("%gms", d))
		added := (p50[2] - p50[1]) / 1000
		fmt.Printf("| %g ms | %.0f µs | %.0f µs | %.0f µs | %.3f ms | %.3f ms | %+.1f%% |\n", d, p50[0], p50[1], p50[2], (p50[2]-p50[0])/1000, added, 100*(added/(d-0.01)-1))
	}
}
