package chapters

import (
	"regexp"
	"strconv"
	"testing"
	"time"
)

// ch21Step is rank 0's line for one training step with a backward pass.
var ch21Step = regexp.MustCompile(`(?m)^step +\d+/\d+ \| loss \S+ \| backward ([\d.]+) ms \| allreduce ([\d.]+) ms in 4 buckets \| exposed ([\d.]+) ms \| step ([\d.]+) ms$`)

// TestLabCh21OverlapExposed runs chapter 21's lab with a scripted learner: the job
// overlaps its gradient buckets' all_reduce with a 100 ms backward pass, and one
// node's data NIC is limited to 10 or 15 Mbit/s, so the gradient's all_reduce (each
// rank sends 4.2 Mbit a step: 280 ms or more at the limited rate) no longer fits
// behind the pass. The learner splits the step into backward and exposed time (the
// pass as before, the exposed part up by hundreds of milliseconds: the network, not
// the model), then finds the link by its qdisc. Nothing is timed against anything:
// the exposed part is bounded below by the link's rate and the pass's length.
func TestLabCh21OverlapExposed(t *testing.T) {
	// Seed 21: node2 at 15 Mbit/s; seed 1: node1 (rank 0, where the learner reads the log) at 10 Mbit/s.
	PlaySeeds(t, "ch21-overlap-exposed", []uint64{21, 1}, func(lr *Learner) Verdicts {
		node := lr.V("node")
		other := Others(node, "node1", "node2")[0]
		lr.T.Logf("variant: node=%s rate=%s", node, lr.V("rate"))

		// The log may hold runs from before the fault: start it afresh and wait for
		// step lines of a run with it.
		lr.Run("node1", "rm -f train.log")
		steps := lr.PollEvidence("node1", "grep '^step' train.log | tail -12", 60, 2*time.Second)
		// The pass is as long as ever (a timer: at least 100 ms); most of the step is
		// communication left over after it.
		for _, m := range ch21Step.FindAllStringSubmatch(lr.Out(steps), -1) {
			back, _ := strconv.ParseFloat(m[1], 64)
			exposed, _ := strconv.ParseFloat(m[3], 64)
			if back < 100 || exposed < 0 {
				lr.T.Errorf("step line %q: want backward >= 100 ms and exposed >= 0", m[0])
			}
		}
		qdisc := lr.Run(node, "tc -s qdisc show dev rdma0")
		healthy := lr.Run(other, "tc -s qdisc show dev rdma0")
		mgmt := lr.Run(node, "tc -s qdisc show dev eth0")
		// Typed, not read from the log: no credit however right it looks.
		fake := lr.Run("node1", "echo 'step 9/12 | loss 0.1 | backward 100.0 ms | allreduce 300.0 ms in 4 buckets | exposed 200.0 ms | step 300.0 ms'")
		return Verdicts{
			Right:     Answer{"nic-rate-limited", Loc{"node": node, "nic": "rdma0"}},
			Counts:    []Ref{qdisc, steps},
			CountsNot: []Ref{healthy, mgmt, fake},
			WrongAt:   []Loc{{"node": other, "nic": "rdma0"}, {"node": node, "nic": "eth0"}},
			// "The new model's backward got slower": the log says otherwise.
			WrongClass: []Answer{{Class: "cpu-starvation", Loc: Loc{"node": node}}},
		}
	})
}
