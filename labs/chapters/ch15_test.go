package chapters

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/commlab/commlab/labs/record"
)

// ch15PerRank is what a learner would type to tabulate the job's trace per rank: the
// mean length of its timed collective calls, and of its local work (the check's
// "init data" and "verify" slices, which involve no peer).
const ch15PerRank = `python3 -c 'import json, collections as C; ev=[e for e in json.load(open("trace.json"))["traceEvents"] if e["ph"]=="X"]; d=C.defaultdict(list); [d[(e["tid"], "local" if e["name"] in ("init data", "verify") else e["cat"])].append(e["dur"]) for e in ev]; m=lambda k: sum(d[k])/max(len(d[k]), 1); [print("rank", t, "coll_us %.0f" % m((t, "out-of-place")), "local_us %.0f" % m((t, "local"))) for t in sorted({e["tid"] for e in ev})]'`

var ch15Row = regexp.MustCompile(`(?m)^rank (\d+) coll_us (\d+) local_us (\d+)$`)

// TestLabCh15StragglerTrace runs chapter 15's lab with a scripted learner: one node's
// rank runs under a small CPU quota and the job writes a Chrome trace after each run.
// The learner tabulates the trace per rank, finds the rank that enters every call
// last (and so waits least), and reads that node's cgroup counters.
func TestLabCh15StragglerTrace(t *testing.T) {
	// Seed 15: node3 at 0.08 cores; seed 8: node1 (rank 0, where the learner reads the
	// trace) at 0.1 cores, the mildest quota.
	PlaySeeds(t, "ch15-straggler-trace", []uint64{15, 8}, func(lr *Learner) Verdicts {
		node := lr.V("node")
		other := Others(node, FourNodes...)[0]
		lr.T.Logf("variant: node=%s cpus=%s", node, lr.V("cpus"))

		// The trace in place may be the baseline run's, from before the fault: wait for a new one.
		lr.Run("node1", "rm -f trace.json")
		lr.Poll("node1", "ls -l trace.json", 90, 2*time.Second, func(c record.Command) bool { return c.Exit == 0 })
		all := lr.Run("node1", `python3 -c 'import json; [print(e["tid"], e["name"], e.get("cat"), e["ts"], e["dur"]) for e in json.load(open("trace.json"))["traceEvents"] if e["ph"] == "X"]'`)
		lr.T.Logf("trace:\n%s", lr.Out(all))
		table := lr.Run("node1", ch15PerRank)
		out := lr.Out(table)
		lr.T.Logf("per rank:\n%s", out)
		rows := ch15Row.FindAllStringSubmatch(out, -1)
		if len(rows) != 4 {
			lr.T.Fatalf("want 4 ranks in the table, got:\n%s", out)
		}
		slowest, slow, second := -1, 0.0, 0.0
		for _, m := range rows {
			r, _ := strconv.Atoi(m[1])
			l, _ := strconv.ParseFloat(m[3], 64)
			if l > slow {
				slowest, slow, second = r, l, slow
			} else if l > second {
				second = l
			}
		}
		// Rank i runs on node i+1.
		want, _ := strconv.Atoi(node[len("node"):])
		if slowest != want-1 || !(slow > 1.5*second) {
			lr.T.Errorf("the rank with the longest local work is %d (%.0f µs, next %.0f µs), want rank %d (on %s) at over 1.5 times the next", slowest, slow, second, want-1, node)
		}
		stat := lr.Run(node, "cat "+cpuDir()+"cpu.stat")
		healthyStat := lr.Run(other, "cat "+cpuDir()+"cpu.stat")
		raw := lr.Run("node1", "head -c 300 trace.json")
		return Verdicts{
			Right:     Answer{"cpu-starvation", Loc{"node": node}},
			Counts:    []Ref{stat, table},
			CountsNot: []Ref{healthyStat, raw},
			WrongAt:   []Loc{{"node": other}},
		}
	}, Alone) // the trace's timings are compared: no other lab beside it
}
