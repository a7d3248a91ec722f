package chapters

import (
	"strings"
	"testing"
	"time"
)

// TestLabCh20ChannelsCapped runs chapter 20's lab with a scripted learner: one node's
// profile.d caps its rank at one channel while the other rank builds two, so channel 1
// never connects and every run fails. The learner reads which channels each rank
// connected, then the set-by-environment line only one node printed, and the script.
func TestLabCh20ChannelsCapped(t *testing.T) {
	PlaySeeds(t, "ch20-channels-capped", []uint64{20, 3}, func(lr *Learner) Verdicts {
		node := lr.V("node")
		other := Others(node, "node1", "node2")[0]
		lr.T.Logf("variant: node=%s", node)

		// A faulted run has failed: the two-channel rank waited for channel 1 in vain.
		failure := lr.Poll("node1", "grep -h -e '==>' -e 'Channel' -e 'NCCL failure' train.log | tail -n 20", 20, 3*time.Second,
			Printed("channel 1: no connection within"))
		lr.T.Logf("%s", lr.Out(failure))
		// Each rank's connections in the last failed run: the capped one has channel 0
		// only, the other channels 0 and 1.
		lastFailed := `awk '/^==>/{run=""} {run=run $0 "\n"} /NCCL failure/{failed=run} END{printf "%s", failed}' train.log`
		capped := lr.Run("node1", lastFailed+" | grep '^"+node+":.*via NET'")
		if out := lr.Out(capped); !strings.Contains(out, "Channel 00/0") || strings.Contains(out, "Channel 01/0") {
			lr.T.Errorf("want the capped rank on %s to connect channel 0 only:\n%s", node, out)
		}
		healthy := lr.Run("node1", lastFailed+" | grep '^"+other+":.*via NET'")
		if out := lr.Out(healthy); !strings.Contains(out, "Channel 01/0") {
			lr.T.Errorf("want the rank on %s to connect channel 1:\n%s", other, out)
		}
		envLines := lr.Run("node1", "grep -h 'set by environment' train.log | tail -n 6")
		profile := lr.Expect(node, "cat /etc/profile.d/overlap.sh", "NCCL_MAX_NCHANNELS=1")
		healthyEnv := lr.Run(other, "env | grep NCCL")
		return Verdicts{
			Right:      Answer{"algo-proto-forced", Loc{"node": node}},
			Counts:     []Ref{envLines, profile},
			CountsNot:  []Ref{failure, capped, healthy, healthyEnv},
			WrongAt:    []Loc{{"node": other}},
			WrongClass: []Answer{{Class: "bootstrap-port-blocked"}, {Class: "wrong-interface"}},
		}
	})
}
