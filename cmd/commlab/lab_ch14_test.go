package main

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/commlab/commlab/labs/cgroup"
)

// TestLabCh14MeasurementLies runs chapter 14's lab with a scripted learner: one node's
// workloads run under a small CPU quota, so the same single-node test reads several
// times lower there. The learner repeats the test with warm-up and enough iterations
// on both nodes (the gap stays: not noise), then reads the node's cgroup counters.
func TestLabCh14MeasurementLies(t *testing.T) {
	// The learner types commlab: it must sit where the learner uid can run it.
	shellVisibleBin(t)
	// Seed 14: node1 at 0.15 cores; seed 4: node2 at 0.2 cores, the mildest quota.
	playSeeds(t, "ch14-measurement-lies", []uint64{14, 4}, func(lr *learner) verdicts {
		node := lr.v("node")
		other := others(node, "node1", "node2")[0]
		lr.t.Logf("variant: node=%s cpus=%s", node, lr.v("cpus"))

		const test = "commlab bench all_reduce -g 2 -b 4M -e 4M -w 2 -n 10"
		slow := lr.run(node, test)
		fast := lr.run(other, test)
		s, f := avgBusBW(lr, slow), avgBusBW(lr, fast)
		lr.t.Logf("%s: %.4f GB/s, %s: %.4f GB/s\n%s\n%s", node, s, other, f, lr.out(slow), lr.out(fast))
		if !(s < 0.6*f) {
			lr.t.Errorf("with warm-up and 10 iterations, the squeezed %s reads %.4f GB/s, the healthy %s %.4f: the fault does not show", node, s, other, f)
		}
		// The colleague's single-shot measurement on the bad node proves nothing.
		once := lr.run(node, "commlab bench all_reduce -g 2 -b 4M -e 4M -w 0 -n 1")
		stat := lr.run(node, "cat "+cpuDir()+"cpu.stat")
		healthyStat := lr.run(other, "cat "+cpuDir()+"cpu.stat")
		return verdicts{
			right:     answer{"cpu-starvation", loc{"node": node}},
			counts:    []ref{stat, slow},
			countsNot: []ref{fast, once, healthyStat},
			wrongAt:   []loc{{"node": other}},
		}
	})
}

var avgBusBWLine = regexp.MustCompile(`# Avg bus bandwidth\s*:\s*([\d.]+)`)

// avgBusBW is the Avg bus bandwidth a bench run printed, in GB/s.
func avgBusBW(lr *learner, c ref) float64 {
	lr.t.Helper()
	m := avgBusBWLine.FindStringSubmatch(lr.out(c))
	if m == nil {
		lr.t.Fatalf("no Avg bus bandwidth in:\n%s", lr.out(c))
	}
	x, _ := strconv.ParseFloat(m[1], 64)
	return x
}

// cpuDir is where a learner reads the node cgroup's CPU files.
func cpuDir() string {
	if cgroup.Unified() {
		return "/sys/fs/cgroup/"
	}
	return "/sys/fs/cgroup/cpu/"
}
