package chapters

import (
	"context"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/commlab/commlab/injector"
	"github.com/commlab/commlab/labs/record"
)

// ch13Times reads a sweep row: size, out-of-place and in-place time (µs).
var ch13Times = regexp.MustCompile(`(?m)^\s+(\d+)\s+\d+\s+float\s+sum\s+-1\s+([\d.]+)\s+\S+\s+\S+\s+\S+\s+([\d.]+)\s`)

// TestLabCh13LatencyFit runs chapter 13's second lab with a scripted learner: one
// node's rdma0 delays what it sends by 4 to 8 ms and takes in 30 to 60 Mbit/s. The
// learner fits α (the smallest rows) and β (the slope of the two largest) to the job's
// last two sweeps and reports α and the rate 1/β gives; both must be within the lab's
// tolerances, and the usual slips (the round trip for α, 2S bytes a call, MB/s for
// Mbit/s) outside them. Then the learner finds the NIC by tc and ping.
func TestLabCh13LatencyFit(t *testing.T) {
	// Seed 3: node1, 4 ms (the smallest delay: α's host overhead weighs most) at 40 Mbit/s;
	// seed 6: node2, 8 ms at 60 Mbit/s (the fastest rate: the busy host lowers it most).
	num := func(s string) float64 { x, _ := strconv.ParseFloat(s, 64); return x }
	PlaySeeds(t, "ch13-latency-fit", []uint64{3, 6}, func(lr *Learner) Verdicts {
		node := lr.V("node")
		other := Others(node, "node1", "node2")[0]
		delay, _ := strconv.ParseFloat(lr.V("delay"), 64)
		rate, _ := strconv.ParseFloat(lr.V("rate"), 64)

		lr.Run("node1", "rm -f train.log")
		// A busy host only adds time: each size's time is the smallest of its two columns
		// in every sweep so far, read once each size has two (a single sweep read 9.4 ms
		// for a 4 ms delay at load 9). Rows come as they finish: a sweep may be partial.
		fastest := map[float64]float64{}
		sweep := lr.Poll("node1", "grep -E '^ +[0-9]+ +[0-9]+ +float' train.log", 90, 2*time.Second, func(c record.Command) bool {
			seen := map[float64]int{}
			clear(fastest)
			for _, r := range ch13Times.FindAllStringSubmatch(c.Output, -1) {
				size := num(r[1])
				seen[size]++
				if t, ok := fastest[size]; !ok || min(num(r[2]), num(r[3])) < t {
					fastest[size] = min(num(r[2]), num(r[3]))
				}
			}
			if len(seen) < 7 {
				return false
			}
			for _, n := range seen {
				if n < 2 {
					return false
				}
			}
			return true
		})
		sizes := slices.Sorted(maps.Keys(fastest))
		if len(sizes) != 7 {
			lr.T.Fatalf("%d sizes in the sweeps, want 7: %v", len(sizes), sizes)
		}
		t := func(i int) float64 { return fastest[sizes[i]] }
		alpha := min(t(0), t(1))                      // 1 KiB and 4 KiB
		beta := (t(6) - t(5)) / (sizes[6] - sizes[5]) // 1 MiB to 4 MiB, µs per byte
		mbit := 8 / beta
		lr.T.Logf("variant: node=%s delay=%g ms rate=%g Mbit/s; fit: alpha %.0f µs (%+.0f%%), 1/beta %.1f Mbit/s (%+.0f%%)",
			node, delay, rate, alpha, 100*(alpha/(1000*delay)-1), mbit, 100*(mbit/rate-1))

		peer, here := lr.Addr(other, "rdma0"), lr.Addr(node, "rdma0")
		ping := lr.Run(node, "ping -n -c 20 -i 0.2 "+peer)
		pingBack := lr.Run(other, "ping -n -c 20 -i 0.2 "+here)
		tc := lr.Run(node, "tc filter show dev rdma0 egress")
		if injector.Probe(context.Background()).Netem {
			tc = lr.Run(node, "tc qdisc show dev rdma0")
		}
		healthy := lr.Run(other, "tc filter show dev rdma0 egress")
		right := map[string]float64{"alpha": alpha, "link-rate": mbit}
		return Verdicts{
			Right:  Answer{"link-delay", Loc{"node": node, "nic": "rdma0"}},
			Counts: []Ref{tc, ping},
			// The ping back crosses the same delay but is not on the node that adds it.
			CountsNot: []Ref{healthy, sweep, pingBack},
			WrongAt:   []Loc{{"node": other, "nic": "rdma0"}},
			WrongClass: []Answer{{Class: "nic-rate-limited", Loc: Loc{"node": node, "nic": "rdma0"}},
				{Class: "cpu-starvation", Loc: Loc{"node": node}}},
			Estimates: right,
			WrongEstimates: []map[string]float64{
				{"alpha": 2 * alpha, "link-rate": mbit},    // the round trip taken for α
				{"alpha": alpha / 1000, "link-rate": mbit}, // α in ms
				{"alpha": alpha, "link-rate": 2 * mbit},    // 2S bytes a call counted
				{"alpha": alpha, "link-rate": mbit / 8},    // MB/s for Mbit/s
				{"alpha": alpha},                           // the rate left out
			},
		}
	}, Alone) // the fit reads timings: no other lab beside it
}
