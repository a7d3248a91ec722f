package chapters

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
	// Seed 14: node1 at 0.15 cores; seed 4: node2 at 0.2 cores, the mildest quota.
	PlaySeeds(t, "ch14-measurement-lies", []uint64{14, 4}, func(lr *Learner) Verdicts {
		node := lr.V("node")
		other := Others(node, "node1", "node2")[0]
		lr.T.Logf("variant: node=%s cpus=%s", node, lr.V("cpus"))

		const test = "commlab bench all_reduce -g 2 -b 4M -e 4M -w 2 -n 10"
		slow := lr.Run(node, test)
		fast := lr.Run(other, test)
		s, f := avgBusBW(lr, slow), avgBusBW(lr, fast)
		lr.T.Logf("%s: %.4f GB/s, %s: %.4f GB/s\n%s\n%s", node, s, other, f, lr.Out(slow), lr.Out(fast))
		if !(s < 0.6*f) {
			lr.T.Errorf("with warm-up and 10 iterations, the squeezed %s reads %.4f GB/s, the healthy %s %.4f: the fault does not show", node, s, other, f)
		}
		// The colleague's single-shot measurement on the bad node proves nothing.
		once := lr.Run(node, "commlab bench all_reduce -g 2 -b 4M -e 4M -w 0 -n 1")
		stat := lr.Run(node, "cat "+cpuDir()+"cpu.stat")
		healthyStat := lr.Run(other, "cat "+cpuDir()+"cpu.stat")
		return Verdicts{
			Right:     Answer{"cpu-starvation", Loc{"node": node}},
			Counts:    []Ref{stat, slow},
			CountsNot: []Ref{fast, once, healthyStat},
			WrongAt:   []Loc{{"node": other}},
		}
	}, Alone) // the learner compares two nodes' speeds: no other lab beside it
}

var avgBusBWLine = regexp.MustCompile(`# Avg bus bandwidth\s*:\s*([\d.]+)`)

// avgBusBW is the Avg bus bandwidth a bench run printed, in GB/s.
func avgBusBW(lr *Learner, c Ref) float64 {
	lr.T.Helper()
	m := avgBusBWLine.FindStringSubmatch(lr.Out(c))
	if m == nil {
		lr.T.Fatalf("no Avg bus bandwidth in:\n%s", lr.Out(c))
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
