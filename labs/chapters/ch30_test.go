package chapters

import (
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/grader"
	"github.com/commlab/commlab/labs/record"
)

// TestLabCh30TwoCauses runs the capstone with a scripted learner: the job's template
// pins NCCL to the 25 Mbit management NIC, and one node's data NIC is capped at
// 8 Mbit behind it. The learner reads the device lines, fixes the template in
// ~/job.env (the job gets slower: the cap shows), finds the cap with tc and lifts it.
// Naming the cap without both fixes fails; fixing only the template earns no
// remediation; the template's own class and the other node fail.
func TestLabCh30TwoCauses(t *testing.T) {
	// Seed 30 caps node2 rdma0, seed 8 node1 rdma1.
	PlaySeeds(t, "ch30-two-causes", []uint64{30, 8}, func(lr *Learner) Verdicts {
		node, nic := lr.V("node"), lr.V("nic")
		other := Others(node, "node1", "node2")[0]
		lr.T.Logf("variant: node=%s nic=%s", node, nic)

		// Step 1: what the job uses. Both ranks on eth0, the template's choice.
		devs := lr.Poll("node1", "grep -h 'NET/Socket : Using' train.log | tail -n 2", 60, 2*time.Second,
			Printed("NET/Socket : Using [0]eth0:"))
		lr.Run("node1", "grep -h 'Avg bus' train.log")
		// Step 2: the learner's half: the data rails in ~/job.env.
		lr.Run("node1", "cat ~/job.env")
		// Step 3: every node's data NICs against the plan (200Mbit each).
		capped := lr.Expect(node, "tc -s qdisc show dev "+nic, "rate 8Mbit")
		healthyQdisc := lr.Expect(other, "tc -s qdisc show dev "+nic, "rate 200Mbit")
		links := lr.Run(node, "ip -br link")

		// Naming the cap is not enough: without the re-measured fix it fails, and so does
		// a fix that falls short of the bar. Both fixes pass.
		right := lr.Truth()
		start := &grader.Measurement{Baseline: 0.003, Faulted: 0.003}
		for _, tt := range []struct {
			name  string
			after float64
			want  bool
		}{{"no fix", 0, false}, {"template fix only", 0.002, false}, {"cap fix only", 0.003, false}, {"both", 0.045, true}} {
			m := *start
			m.After = tt.after
			var mp *grader.Measurement
			if tt.after > 0 {
				mp = &m
			}
			if r := lr.Dry(right, capped, mp); r.Passed != tt.want {
				lr.T.Errorf("the right diagnosis, %s: passed %v, want %v: %+v", tt.name, r.Passed, tt.want, r)
			}
		}
		return Verdicts{
			Right:     right,
			Counts:    []Ref{capped},
			CountsNot: []Ref{healthyQdisc, links, devs},
			WrongAt:   []Loc{{"node": other, "nic": nic}, {"node": node, "nic": Others(nic, "rdma0", "rdma1")[0]}},
			// The template's problem is the learner's own half, not the answer.
			WrongClass: []Answer{{Class: "wrong-interface", Loc: Loc{"node": node}}},
			// The template fixed alone: the job leaves eth0, and the capped channel
			// holds it lower still.
			BadFix: func() {
				lr.Run("node1", "echo NCCL_SOCKET_IFNAME=rdma > ~/job.env")
				lr.Poll("node1", "grep -h 'NET/Socket : Using' train.log | tail -n 2", 90, 2*time.Second,
					func(c record.Command) bool { return strings.Count(c.Output, "[0]rdma0:") == 2 })
			},
			Fix: func() {
				lr.Run(node, "tc qdisc replace dev "+nic+" root handle c1: tbf rate 200mbit burst 250kb latency 25ms")
				lr.Expect(node, "tc qdisc show dev "+nic, "rate 200Mbit")
			},
		}
	})
}
