package chapters

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clhost "github.com/commlab/commlab/internal/host"
)

// TestLabCh24TwoBottlenecks plays chapter 24's closing case: the job's sockets take
// eth0 (25 Mbit) for channel 0 because the template sets no NCCL_SOCKET_IFNAME, and
// one node's rdma0, which carries channel 1, is throttled to 20 Mbit. The learner reads
// the device list in train.log, sets NCCL_SOCKET_IFNAME=rdma in ~/job.env and sees
// almost no gain (channel 0 moves onto the throttled rdma0: no remediation credit),
// then finds the tbf on that node and restores it: the re-measure beats the start by
// the lab's 2.5x. The sandbox, ~/job.env with it, is gone after the lab.
func TestLabCh24TwoBottlenecks(t *testing.T) {
	PlaySeeds(t, "ch24-two-bottlenecks", []uint64{24, 2}, func(lr *Learner) Verdicts {
		node := lr.V("node")
		other := Others(node, FourNodes...)[0]
		lr.T.Logf("variant: node=%s", node)
		sandbox := lr.Lab.Status().Sandbox
		lr.T.Cleanup(func() { // runs before StartLab's: the teardown must leave nothing
			lr.Lab.Stop()
			lr.Lab.Wait()
			paths := []string{filepath.Join(clhost.LabsRunDir, clhost.Prefix+sandbox)}
			for _, n := range FourNodes {
				paths = append(paths, filepath.Join("/run/netns", clhost.Prefix+sandbox+"-"+n))
			}
			for _, p := range paths {
				if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
					lr.T.Errorf("left behind after the lab: %s (%v)", p, err)
				}
			}
		})

		// Baseline: which devices the sockets use, and how far the job is from the wire.
		devs := lr.Poll("node1", "grep -h -e '==>' -e 'NET/Socket : Using' train.log | tail -n 5", 60, 2*time.Second,
			Printed("Using [0]eth0:"))
		bw := lr.Run("node1", "grep -h 'Avg bus' train.log")
		lr.T.Logf("%s", lr.Out(bw))

		// The throttle: tc on the node against a healthy node and the node's other rail.
		tbf := lr.Expect(node, "tc -s qdisc show dev rdma0", "rate 20Mbit")
		healthy := lr.Expect(other, "tc -s qdisc show dev rdma0", "rate 200Mbit")
		otherRail := lr.Expect(node, "tc qdisc show dev rdma1", "rate 200Mbit")
		faked := lr.Run(node, "echo 'qdisc tbf c2: root refcnt 3 rate 20Mbit burst 10000b lat 50ms'")
		if out := lr.Out(faked); !strings.Contains(out, "rate 20Mbit") {
			lr.T.Errorf("the decoy echo printed %q", out)
		}
		return Verdicts{
			Right:     Answer{"nic-rate-limited", Loc{"node": node, "nic": "rdma0"}},
			Counts:    []Ref{tbf},
			CountsNot: []Ref{devs, bw, healthy, otherRail, faked},
			WrongAt:   []Loc{{"node": other, "nic": "rdma0"}, {"node": node, "nic": "eth0"}},
			// The other cause, named as the answer, fails: it is the job's, not the cluster's.
			WrongClass: []Answer{{Class: "wrong-interface", Loc: Loc{"node": "node1"}},
				{Class: "switch-congestion", Loc: Loc{"port": node}}},
			// The first fix alone: channel 0 leaves eth0 for the throttled rdma0.
			BadFix: func() {
				lr.Run("node1", `printf '# data NICs only, not eth0\nNCCL_SOCKET_IFNAME=rdma\n' > ~/job.env`)
			},
			// Then the second: the node's rdma0 back to the rail's 200 Mbit.
			Fix: func() {
				lr.Run(node, "tc qdisc replace dev rdma0 root handle c1: tbf rate 200mbit burst 250kb latency 25ms")
				lr.Expect(node, "tc qdisc show dev rdma0", "rate 200Mbit")
			},
		}
	})
}
