package main

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
	playSeeds(t, "ch19-ifname-trap", []uint64{19, 4}, func(lr *learner) verdicts {
		node := lr.v("node")
		other := others(node, "node1", "node2")[0]
		lr.t.Logf("variant: node=%s", node)

		profile := lr.expect(node, "cat /etc/profile.d/tuning.sh", "NCCL_SOCKET_IFNAME=^docker,lo")
		healthyEnv := lr.run(other, "env | grep NCCL")
		devs := lr.pollEvidence("node1", "grep -h 'NET/Socket : Using' train.log | tail -n 4", 60, 2*time.Second)
		// The job's own runs before and after: the baseline first, then with the script.
		bw := lr.poll("node1", "grep -h 'Avg bus' train.log", 60, 2*time.Second,
			func(c record.Command) bool { return strings.Count(c.Output, "Avg bus") >= 2 })
		runs := ch19BusBW.FindAllStringSubmatch(lr.out(bw), -1)
		if len(runs) >= 2 {
			first, _ := strconv.ParseFloat(runs[0][1], 64)
			last, _ := strconv.ParseFloat(runs[len(runs)-1][1], 64)
			lr.t.Logf("job busbw: %.4f GB/s before, %.4f after", first, last)
			if !(last < 0.5*first) {
				lr.t.Errorf("the job reads %.4f GB/s with the script against %.4f before: the trap does not show", last, first)
			}
		}
		healthyDevs := lr.run("node1", "grep -h 'NET/Socket : Using' train.log | grep '^"+other+":' | tail -n 1")
		return verdicts{
			right:     answer{"wrong-interface", loc{"node": node}},
			counts:    []ref{devs, profile},
			countsNot: []ref{healthyEnv, healthyDevs, bw},
			wrongAt:   []loc{{"node": other}},
			wrongClass: []answer{{class: "transport-forced"},
				{class: "nic-rate-limited", loc: loc{"node": node, "nic": "eth0"}}},
		}
	})
}
