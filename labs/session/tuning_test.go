package session

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/grader"
	"github.com/commlab/commlab/scenarios"
)

// TestTuningStart: a tuning lab's start is the self-test's figure; one that injects
// nothing measured its untuned setting twice and starts from the better run, so an
// unlucky slow self-test does not let an untuned re-measure beat it.
func TestTuningStart(t *testing.T) {
	const faults = "faults:\n" +
		"  - {kind: nic-rate, node: node2, params: {nic: rdma0, rate: \"${rate}mbit\"}}\n" +
		"  - {kind: loss, node: node1, params: {nic: rdma0, percent: \"5%\"}}\n"
	tests := []struct {
		name   string
		faults bool
		runs   []float64 // baseline, self-test, re-measures
		fixed  bool
	}{
		{"no fault, slow self-test, untuned", false, []float64{0.024, 0.016, 0.025}, false},
		{"no fault, slow self-test, tuned", false, []float64{0.024, 0.016, 0.090}, true},
		{"no fault, slow baseline, untuned", false, []float64{0.016, 0.024, 0.025}, false},
		{"a fault: the self-test is the start", true, []float64{1, 0.016, 0.025}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(testScenario, faults) {
				t.Fatal("testScenario's faults changed")
			}
			src := strings.Replace(testScenario, "min_ratio: 0.8", "beat: 1.5", 1)
			if !tt.faults {
				src = strings.Replace(src, faults, "", 1)
			}
			sc, probs := scenarios.Parse("t.yaml", []byte(src), scenarios.Options{})
			if len(probs) > 0 || (len(sc.Faults) > 0) != tt.faults {
				t.Fatalf("scenario: %v (faults %d)", probs, len(sc.Faults))
			}
			h := &fakeHost{workload: func(ctx context.Context, n int) (float64, error) {
				return tt.runs[min(n, len(tt.runs))-1], nil
			}}
			l := Start(context.Background(), Config{Provider: h, Faults: h, DataDir: t.TempDir(), TTL: time.Minute, NoStream: true, Log: quiet}, 1, sc.Draw(1))
			t.Cleanup(func() { l.Stop(); l.Wait() })
			waitFor(t, l, func(s Status) bool { return s.Confirmed })
			res, err := l.Check(context.Background(), grader.Diagnosis{Class: "nic-rate-limited"})
			if err != nil {
				t.Fatal(err)
			}
			fixed := false
			for _, c := range res.Criteria {
				fixed = fixed || (c.Name == "remediation" && c.Earned > 0)
			}
			if fixed != tt.fixed {
				t.Errorf("runs %v: fixed %v, want %v (%+v)", tt.runs, fixed, tt.fixed, res.Criteria)
			}
		})
	}
}
