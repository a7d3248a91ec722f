package chapters

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/labs/record"
)

// ch19BusBW is the Avg bus bandwidth line of a bench run.
var ch19BusBW = regexp.MustCompile(`# Avg bus bandwidth\s*:\s*([\d.]+)`)

// TestLabCh19IfnameTrap runs chapter 19's lab with a scripted learner: one node's
// profile.d adds three "tuning" variables, NCCL_SOCKET_IFNAME=^docker,lo among them,
// which puts the 25 Mbit management NIC first in that node's NET/Socket devices. The
// learner reads the script, compares the job's busbw before and after in train.log,
// and the device lines of each node's rank.
func TestLabCh19IfnameTrap(t *testing.T) {
	PlaySeeds(t, "ch19-ifname-trap", []uint64{19, 4}, func(lr *Learner) Verdicts {
		node := lr.V("node")
		other := Others(node, "node1", "node2")[0]
		lr.T.Logf("variant: node=%s", node)

		profile := lr.Expect(node, "cat /etc/profile.d/tuning.sh", "NCCL_SOCKET_IFNAME=^docker,lo")
		healthyEnv := lr.Run(other, "env | grep NCCL")
		devs := lr.PollEvidence("node1", "grep -h 'NET/Socket : Using' train.log | tail -n 4", 60, 2*time.Second)
		// The job's own runs before and after: the baseline first, then with the script.
		bw := lr.Poll("node1", "grep -h 'Avg bus' train.log", 60, 2*time.Second,
			func(c record.Command) bool { return strings.Count(c.Output, "Avg bus") >= 2 })
		runs := ch19BusBW.FindAllStringSubmatch(lr.Out(bw), -1)
		if len(runs) >= 2 {
			first, _ := strconv.ParseFloat(runs[0][1], 64)
			last, _ := strconv.ParseFloat(runs[len(runs)-1][1], 64)
			lr.T.Logf("job busbw: %.4f GB/s before, %.4f after", first, last)
			if !(last < 0.5*first) {
				lr.T.Errorf("the job reads %.4f GB/s with the script against %.4f before: the trap does not show", last, first)
			}
		}
		healthyDevs := lr.Run("node1", "grep -h 'NET/Socket : Using' train.log | grep '^"+other+":' | tail -n 1")
		return Verdicts{
			Right:     Answer{"wrong-interface", Loc{"node": node}},
			Counts:    []Ref{devs, profile},
			CountsNot: []Ref{healthyEnv, healthyDevs, bw},
			WrongAt:   []Loc{{"node": other}},
			WrongClass: []Answer{{Class: "transport-forced"},
				{Class: "nic-rate-limited", Loc: Loc{"node": node, "nic": "eth0"}}},
		}
	})
}
