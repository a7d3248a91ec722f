package chapters

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/commlab/commlab/labs/record"
)

// ch16RankCPU is a per-rank resource line the bench prints at the end of a run.
var ch16RankCPU = regexp.MustCompile(`(?m)^# Rank\s+(\d+) on\s+(\S+): cpu ([\d.]+) s`)

// ch16QP is a per-QP counter line of the emulation's NET log.
var ch16QP = regexp.MustCompile(`QP to rank \d+ channel \d+: (\d+) packets, (\d+) retransmitted`)

// TestLabCh16ProxyStarved runs chapter 16's lab with a scripted learner: one node's
// rank runs under a small CPU quota, so its network progress stalls while every QP
// stays clean. The learner rules out the network from the NET log, compares the
// ranks' CPU time in one run (the starved rank's is capped by its quota) and reads
// that node's cgroup counters.
func TestLabCh16ProxyStarved(t *testing.T) {
	// Seed 16: node4 at 0.08 cores; seed 3: node1 (rank 0, where the learner reads the
	// log) at 0.05 cores.
	PlaySeeds(t, "ch16-proxy-starved", []uint64{16, 3}, func(lr *Learner) Verdicts {
		node := lr.V("node")
		other := Others(node, FourNodes...)[0]
		lr.T.Logf("variant: node=%s cpus=%s", node, lr.V("cpus"))

		// The log may hold runs from before the fault: start it afresh and wait for a whole run.
		lr.Run("node1", "rm -f train.log")
		lines := lr.Poll("node1", "grep -E '^# Rank .*: cpu' train.log", 90, 2*time.Second, func(c record.Command) bool {
			return len(ch16RankCPU.FindAllString(c.Output, -1)) >= 4
		})
		// The network is not what is wrong: retransmissions under 10 % of every QP's
		// packets (the shared host's load causes some hundreds, and a starved receiver
		// the odd ack timeout; ch09's 2 % RoCE loss causes tens of thousands).
		qps := lr.Run("node1", "grep 'QP to rank' train.log")
		for _, m := range ch16QP.FindAllStringSubmatch(lr.Out(qps), -1) {
			packets, _ := strconv.Atoi(m[1])
			retx, _ := strconv.Atoi(m[2])
			if retx*10 > packets {
				lr.T.Errorf("the network should be clean, a QP shows %q", m[0])
			}
		}
		cpu := map[string]float64{}
		for _, m := range ch16RankCPU.FindAllStringSubmatch(lr.Out(lines), 4) {
			cpu[m[2]], _ = strconv.ParseFloat(m[3], 64)
		}
		// Capped by its quota, the starved rank uses the least CPU of the run (0.5 to 0.8
		// times the others' in the runs seen).
		for _, n := range Others(node, FourNodes...) {
			if !(cpu[node] < 0.9*cpu[n]) {
				lr.T.Errorf("rank CPU: %s %.2f s, %s %.2f s; want the starved node's under 0.9 times every other's", node, cpu[node], n, cpu[n])
			}
		}
		stat := lr.Run(node, "cat "+cpuDir()+"cpu.stat")
		healthyStat := lr.Run(other, "cat "+cpuDir()+"cpu.stat")
		return Verdicts{
			Right:     Answer{"cpu-starvation", Loc{"node": node}},
			Counts:    []Ref{stat, lines},
			CountsNot: []Ref{qps, healthyStat},
			WrongAt:   []Loc{{"node": other}},
		}
	}, Alone) // the ranks' CPU times are compared: no other lab beside it
}
