package chapters

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/labs/record"
)

// ch20Rings are the ring lines rank 0 prints, one per channel: "Channel 00/04 : 0 1".
var ch20Rings = regexp.MustCompile(`(?m)NCCL INFO Channel (\d+)/(\d+) :`)

// TestLabCh20ChannelsCapped runs chapter 20's lab with a scripted learner: the job asks
// for four channels, one per data NIC, and one node's profile.d caps them at one. NCCL
// takes the fewest channels any rank asks for, so both nodes drop to one channel on
// rdma0. The learner reads the channel count before and after, the per-NIC counters
// (the symptom, on both nodes alike), and the set-by-environment line only one node printed.
func TestLabCh20ChannelsCapped(t *testing.T) {
	PlaySeeds(t, "ch20-channels-capped", []uint64{20, 3}, func(lr *Learner) Verdicts {
		node := lr.V("node")
		other := Others(node, "node1", "node2")[0]
		lr.T.Logf("variant: node=%s", node)

		// The capped run: rank 0 reports one channel of one, whichever node set the cap.
		rings := lr.Poll("node1", "grep -h -E 'Channel [0-9]+/[0-9]+ :|==>' train.log", 60, 2*time.Second,
			func(c record.Command) bool { return strings.Contains(c.Output, "Channel 00/01 :") })
		counts := map[string]bool{}
		for _, m := range ch20Rings.FindAllStringSubmatch(lr.Out(rings), -1) {
			counts[m[2]] = true
		}
		if !counts["04"] || !counts["01"] {
			lr.T.Errorf("want the job's runs with 4 channels before and 1 after, got:\n%s", lr.Out(rings))
		}
		// Once capped, every channel connection is on NET/Socket/0 (rdma0): count the
		// connection lines after the first one-channel ring, by device.
		devs := lr.Poll("node1", `awk '/Channel 00\/01 :/{f=1} f&&/via NET\/Socket\/0/{z++} f&&/via NET\/Socket\/[1-9]/{o++} END{print z+0, o+0}' train.log`,
			30, 2*time.Second, func(c record.Command) bool { return !strings.HasPrefix(c.Output, "0 ") })
		if f := strings.Fields(lr.Out(devs)); len(f) != 2 || f[0] == "0" || f[1] != "0" {
			lr.T.Errorf("after the cap, want connections on NET/Socket/0 only; lines on device 0 and on others: %q", lr.Out(devs))
		}
		// One NIC instead of four: a factor of four by construction (about 3.6 seen on a
		// loaded host), so a busy machine cannot hide it.
		bw := lr.Poll("node1", "grep -h 'Avg bus' train.log", 60, 2*time.Second,
			func(c record.Command) bool { return strings.Count(c.Output, "Avg bus") >= 2 })
		if runs := avgBusBWLine.FindAllStringSubmatch(lr.Out(bw), -1); len(runs) >= 2 {
			first, _ := strconv.ParseFloat(runs[0][1], 64)
			last, _ := strconv.ParseFloat(runs[len(runs)-1][1], 64)
			lr.T.Logf("job busbw: %.4f GB/s with 4 channels, %.4f with 1", first, last)
			if !(last < 0.6*first) {
				lr.T.Errorf("the job reads %.4f GB/s capped against %.4f before: the cap does not show", last, first)
			}
		}
		// The symptom is the same on both nodes: evidence of what, not of where.
		otherTx := lr.Run(other, "cat /sys/class/net/rdma[0-3]/statistics/tx_bytes")
		envLines := lr.PollEvidence("node1", "grep -h 'set by environment' train.log | tail -n 8", 30, 2*time.Second)
		profile := lr.Expect(node, "cat /etc/profile.d/overlap.sh", "NCCL_MAX_NCHANNELS=1")
		healthyEnv := lr.Run(other, "env | grep NCCL")
		return Verdicts{
			Right:     Answer{"algo-proto-forced", Loc{"node": node}},
			Counts:    []Ref{envLines, profile},
			CountsNot: []Ref{rings, bw, otherTx, healthyEnv},
			WrongAt:   []Loc{{"node": other}},
			WrongClass: []Answer{{Class: "wrong-interface"},
				{Class: "nic-rate-limited", Loc: Loc{"node": node, "nic": "rdma0"}}},
		}
	})
}
