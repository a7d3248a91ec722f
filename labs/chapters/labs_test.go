package chapters

import (
	"strconv"
	"testing"
	"time"
)

// TestLabRailThrottled: one node's rdma0 is shaped far below the rail's rate. The
// learner reads both nodes' qdiscs, echoes the expected line on the healthy node (fake
// evidence), and puts the shaper back to the rail's plan.
func TestLabRailThrottled(t *testing.T) {
	Play(t, "ch08-rail-throttled", 3, func(lr *Learner) Verdicts {
		node := lr.V("node")
		other := Others(node, "node1", "node2")[0]
		qdisc := lr.Run(node, "tc -s qdisc show dev rdma0")
		lr.T.Logf("evidence output: %s", lr.Out(qdisc))
		healthy := lr.Run(other, "tc -s qdisc show dev rdma0")
		fake := lr.Run(other, "echo 'qdisc tbf c1: root refcnt 2 rate "+lr.V("rate")+"Mbit burst 1b lat 1ms'")
		planned := "tc qdisc replace dev rdma0 root handle c1: tbf rate 200mbit burst 250kb latency 25ms"
		return Verdicts{
			Right:  Answer{"nic-rate-limited", Loc{"node": node, "nic": "rdma0"}},
			Counts: []Ref{qdisc},
			// Echoed evidence and the healthy node's qdisc earn nothing.
			CountsNot: []Ref{fake, healthy},
			WrongAt:   []Loc{{"node": other, "nic": "rdma0"}},
			// The plan's shaper on the healthy node changes nothing; on the node, it fixes.
			BadFix: func() { lr.Run(other, planned) },
			Fix:    func() { lr.Run(node, planned) },
		}
	})
}

// TestLabs runs the namespace scenarios whose story is one command with a scripted
// learner: the evidence command in a real shell (polled until it shows the fault), an
// unrelated command, then the four checks of Judge.
// roceDropFix removes roce-drop in each direction: an nftables ingress chain, or
// the tc BPF filter at clsact egress.
var roceDropFix = map[string]string{"in": "nft flush ruleset", "out": "tc qdisc del dev rdma0 clsact"}

func TestLabs(t *testing.T) {
	t.Parallel()
	other := func(n string, all ...string) string { return Others(n, all...)[0] }
	type command func(v map[string]string) (node, line string)
	tests := []struct {
		id       string
		seed     uint64
		evidence command
		wrong    func(v map[string]string) Loc
		badFix   command
		fix      command
		// sees is another command whose output must show the fault to the learner.
		sees func(v map[string]string) (node, line, want string)
	}{
		{
			id: "ch08-switch-congestion", seed: 5,
			evidence: func(v map[string]string) (string, string) { return v["victim"], "ss -tn" },
			wrong:    func(v map[string]string) Loc { return Loc{"port": other(v["victim"], "node1", "node2")} },
		},
		{
			id: "ch08-link-loss", seed: 7,
			evidence: func(v map[string]string) (string, string) { return v["node"], "nft list ruleset" },
			wrong: func(v map[string]string) Loc {
				return Loc{"node": other(v["node"], "node1", "node2", "node3"), "nic": "rdma0"}
			},
			badFix: func(v map[string]string) (string, string) {
				return other(v["node"], "node1", "node2"), "tc qdisc show dev rdma0"
			},
			fix: func(v map[string]string) (string, string) { return v["node"], "nft flush ruleset" },
		},
		{
			id: "ch09-roce-retry-exceeded", seed: 11,
			evidence: func(v map[string]string) (string, string) { return "node1", "grep 'Got completion' train.log" },
			wrong: func(v map[string]string) Loc {
				return Loc{"node": other(v["node"], "node1", "node2"), "nic": "rdma0"}
			},
			badFix: func(v map[string]string) (string, string) {
				return other(v["node"], "node1", "node2"), roceDropFix[v["direction"]]
			},
			fix: func(v map[string]string) (string, string) { return v["node"], roceDropFix[v["direction"]] },
		},
		{
			id: "ch17-straggler-cpu", seed: 17,
			evidence: func(v map[string]string) (string, string) { return v["node"], "cat /sys/fs/cgroup/cpu/cpu.stat" },
			wrong:    func(v map[string]string) Loc { return Loc{"node": other(v["node"], "node1", "node2")} },
			sees: func(v map[string]string) (string, string, string) {
				cpus, _ := strconv.ParseFloat(v["cpus"], 64)
				return v["node"], "cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us", strconv.Itoa(int(cpus*100000 + 0.5))
			},
		},
		{
			id: "ch07-wrong-interface", seed: 13,
			evidence: func(v map[string]string) (string, string) { return "node1", "grep 'NET/Socket : Using' train.log" },
			sees: func(v map[string]string) (string, string, string) {
				return v["node"], "env | grep NCCL_SOCKET_IFNAME; cat /etc/profile.d/nccl.sh", "export NCCL_SOCKET_IFNAME=eth0"
			},
			wrong: func(v map[string]string) Loc { return Loc{"node": other(v["node"], "node1", "node2")} },
		},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			Play(t, tt.id, tt.seed, func(lr *Learner) Verdicts {
				v := lr.Lab.Variant.Values
				node, line := tt.evidence(v)
				real := lr.PollEvidence(node, line, 20, 3*time.Second)
				if tt.sees != nil {
					lr.Expect(tt.sees(v))
				}
				vd := Verdicts{
					Right:     lr.Truth(),
					Counts:    []Ref{real},
					CountsNot: []Ref{lr.Run(node, "ip -br link")},
					WrongAt:   []Loc{tt.wrong(v)},
				}
				if tt.badFix != nil {
					vd.BadFix = func() { lr.Run(tt.badFix(v)) }
				}
				if tt.fix != nil {
					vd.Fix = func() { lr.Run(tt.fix(v)) }
				}
				return vd
			})
		})
	}
}
