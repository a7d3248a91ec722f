package chapters

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/commlab/commlab/labs/record"
)

// ch23Row is a row of the job's table: size and the out-of-place time (µs).
var ch23Row = regexp.MustCompile(`(?m)^\s+(\d+)\s+\d+\s+float\s+sum\s+-1\s+([\d.]+)\s`)

// TestLabCh23CompressBudget runs chapter 23's lab with a scripted learner: the job
// all-reduces one gradient bucket at its fp32, bf16 and fp8 byte counts, and one node's
// data NIC sends at 10 or 20 Mbit/s on a 200 Mbit/s rail. The time halves with the bytes
// (so compression "works"), but every row moves at a tenth of the rail or less: the
// learner turns the fp32 row into a rate, sees the link is the problem and finds its
// shaper. Nothing is timed against anything: the fp32 row's time is bounded below by
// the shaper (8.39 Mbit at 20 Mbit/s is 420 ms, twice the 200 ms the evidence asks for).
func TestLabCh23CompressBudget(t *testing.T) {
	// Seed 23: node1 (rank 0) at 10 Mbit/s; seed 4: node2 at 20 Mbit/s, the mildest rate.
	PlaySeeds(t, "ch23-compress-budget", []uint64{23, 4}, func(lr *Learner) Verdicts {
		node := lr.V("node")
		other := Others(node, "node1", "node2")[0]
		lr.T.Logf("variant: node=%s rate=%s", node, lr.V("rate"))

		// The log may hold rounds from before the fault: start it afresh, wait for a whole round.
		lr.Run("node1", "rm -f train.log")
		rows := lr.Poll("node1", "grep -E '^ +[0-9]+ +[0-9]+ +float' train.log | tail -3", 60, 2*time.Second, func(c record.Command) bool {
			return len(ch23Row.FindAllString(c.Output, -1)) == 3
		})
		lr.T.Logf("rows:\n%s", lr.Out(rows))
		for _, m := range ch23Row.FindAllStringSubmatch(lr.Out(rows), -1) {
			s, _ := strconv.ParseFloat(m[1], 64)
			us, _ := strconv.ParseFloat(m[2], 64)
			// A busy host only lowers the rate: the check fails only if the shaper is missing.
			if mbit := 8 * s / us; !(mbit < 0.6*200) {
				lr.T.Errorf("the %.0f-byte row moves %.0f Mbit/s, want well under the rail's 200: the fault does not show", s, mbit)
			}
		}
		tbf := lr.Run(node, "tc -s qdisc show dev rdma0")
		healthy := lr.Run(other, "tc -s qdisc show dev rdma0")
		mgmt := lr.Run(node, "tc -s qdisc show dev eth0")
		// Typed, not read from the log: no credit however right it looks.
		fake := lr.Run("node1", "echo '     1048576        262144     float     sum      -1   420000    0.00    0.00      0'")
		return Verdicts{
			Right:     Answer{"nic-rate-limited", Loc{"node": node, "nic": "rdma0"}},
			Counts:    []Ref{tbf, rows},
			CountsNot: []Ref{healthy, mgmt, fake},
			WrongAt:   []Loc{{"node": other, "nic": "rdma0"}, {"node": node, "nic": "eth0"}},
			// "The time follows the bytes, so the wire is full": the rate says it is not.
			WrongClass: []Answer{{Class: "link-delay", Loc: Loc{"node": node, "nic": "rdma0"}}},
		}
	})
}
