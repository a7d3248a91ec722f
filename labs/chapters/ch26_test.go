package chapters

import (
	"encoding/base64"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/labs/record"
)

// TestLabCh26AlertRules runs chapter 26's lab with a scripted learner: one node's rdma0
// is flapping. The learner reads carrier_changes on both nodes (the flapping one rises,
// the healthy one stays at 2), then writes ~/alerts.yml. Rules without a for: (a busbw
// dip pages) earn nothing; the reference rules pass every recorded case.
func TestLabCh26AlertRules(t *testing.T) {
	ref, err := os.ReadFile("../session/testdata/ch26-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	PlaySeeds(t, "ch26-alert-rules", []uint64{26}, func(lr *Learner) Verdicts {
		node := lr.V("node")
		other := Others(node, "node1", "node2")[0]
		lr.T.Logf("variant: node=%s", node)

		const read = "cat /sys/class/net/rdma0/carrier_changes"
		healthy := lr.Run(other, read)
		rising := lr.PollEvidence(node, read, 20, time.Second)
		first := lr.Number(rising)
		later := lr.Poll(node, read, 20, time.Second, func(c record.Command) bool {
			n, err := strconv.Atoi(strings.TrimSpace(c.Output))
			return err == nil && n > first
		})
		if n := lr.Number(lr.Run(other, read)); n != lr.Number(healthy) || n != 2 {
			lr.T.Errorf("the healthy rdma0's carrier_changes went %d → %d, want 2 → 2", lr.Number(healthy), n)
		}
		noCarrier := lr.PollEvidence(node, "ip link show dev rdma0", 20, 500*time.Millisecond)
		healthyLink := lr.Expect(other, "ip link show dev rdma0", "state UP")
		lr.Run(node, "echo 9 > /tmp/rdma0_carrier_changes")
		decoy := lr.Run(node, "cat /tmp/rdma0_carrier_changes")

		// The rules go in as base64 in short lines: a terminal line of 2 KB never finishes.
		write := func(rules string) {
			b64 := base64.StdEncoding.EncodeToString([]byte(rules))
			lr.Run(node, "rm -f ~/alerts.b64")
			for len(b64) > 0 {
				n := min(len(b64), 300)
				lr.Run(node, "echo "+b64[:n]+" >> ~/alerts.b64")
				b64 = b64[n:]
			}
			lr.Run(node, "base64 -d ~/alerts.b64 > ~/alerts.yml")
		}
		noFor := strings.Replace(string(ref), "nccl_tests_busbw_gbps < 0.8 * 180\n        for: 10m", "nccl_tests_busbw_gbps < 0.8 * 180", 1)
		if noFor == string(ref) {
			lr.T.Fatal("the reference rules changed: no busbw rule with for: 10m")
		}
		return Verdicts{
			Right:      Answer{"nic-flapping", Loc{"node": node, "nic": "rdma0"}},
			Counts:     []Ref{rising, later, noCarrier},
			CountsNot:  []Ref{healthy, healthyLink, decoy},
			WrongAt:    []Loc{{"node": other, "nic": "rdma0"}, {"node": node, "nic": "eth0"}},
			WrongClass: []Answer{{Class: "nic-down"}},
			BadFix:     func() { write(noFor) },
			Fix: func() {
				write(string(ref))
				// The learner's shell has the host's promtool for a syntax check.
				lr.Expect(node, "promtool check rules alerts.yml", "SUCCESS: 5 rules found")
			},
		}
	})
}
