package chapters

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/commlab/commlab/labs/record"
)

// ch13Row is a row of the sweep's table: size and the out-of-place time (µs).
var ch13Row = regexp.MustCompile(`(?m)^\s+(\d+)\s+\d+\s+float\s+sum\s+-1\s+([\d.]+)\s`)

// TestLabCh13AlphaBetaFit runs chapter 13's lab with a scripted learner: one node's data
// NIC sends at 40 to 80 Mbit/s on a 200 Mbit/s rail. The learner fits T(S) = α + βS to the
// job's size sweep, turns β into the bottleneck's rate and finds the NIC shaped at it.
func TestLabCh13AlphaBetaFit(t *testing.T) {
	// Seed 13: node1 at 40 Mbit/s; seed 4: node2 at 80 Mbit/s, the mildest rate.
	PlaySeeds(t, "ch13-alpha-beta-fit", []uint64{13, 4}, func(lr *Learner) Verdicts {
		node := lr.V("node")
		other := Others(node, "node1", "node2")[0]
		lr.T.Logf("variant: node=%s rate=%s", node, lr.V("rate"))

		// The log may hold rounds from before the fault: start it afresh, wait for a whole round.
		lr.Run("node1", "rm -f train.log")
		sweep := lr.Poll("node1", "grep -E '^ +[0-9]+ +[0-9]+ +float' train.log | tail -7", 60, 2*time.Second, func(c record.Command) bool {
			return len(ch13Row.FindAllString(c.Output, -1)) == 7
		})
		var sizes, times []float64
		for _, m := range ch13Row.FindAllStringSubmatch(lr.Out(sweep), -1) {
			s, _ := strconv.ParseFloat(m[1], 64)
			us, _ := strconv.ParseFloat(m[2], 64)
			sizes, times = append(sizes, s), append(times, us)
		}
		// α from the smallest row, β from the slope between the two largest: a least-squares
		// intercept would carry the large rows' noise.
		last := len(sizes) - 1
		alpha := times[0]
		beta := (times[last] - times[last-1]) / (sizes[last] - sizes[last-1])
		// Two ranks: each sends S bytes a call, so the largest row's S/T (bytes per µs = MB/s)
		// is a lower bound on the bottleneck's rate. A busy host only lowers it, so the check
		// fails only when the shaper (at most 80 Mbit/s) is missing; it cannot prove the shaper
		// (a busy host can read the healthy rail under 120 too): the tc evidence does.
		lower := 8 * sizes[last] / times[last]
		lr.T.Logf("alpha %.0f µs, beta %.4f µs/B (%.0f Mbit/s); largest row %.0f Mbit/s", alpha, beta, 8/beta, lower)
		if !(lower < 0.6*200) {
			lr.T.Errorf("the largest row moves %.0f Mbit/s, want well under the rail's 200: the fault does not show", lower)
		}
		tbf := lr.Run(node, "tc -s qdisc show dev rdma0")
		healthy := lr.Run(other, "tc -s qdisc show dev rdma0")
		return Verdicts{
			Right:     Answer{"nic-rate-limited", Loc{"node": node, "nic": "rdma0"}},
			Counts:    []Ref{tbf},
			CountsNot: []Ref{healthy, sweep},
			WrongAt:   []Loc{{"node": other, "nic": "rdma0"}},
			// The fit rules out latency: alpha did not move, beta did.
			WrongClass: []Answer{{Class: "link-delay", Loc: Loc{"node": node, "nic": "rdma0"}},
				{Class: "cpu-starvation", Loc: Loc{"node": node}}},
		}
	})
}
