package chapters

import (
	"regexp"
	"testing"
	"time"

	"github.com/commlab/commlab/labs/record"
)

// ephemeralListener matches a listening socket on a port of the kernel's default
// ip_local_port_range (32768-60999), as ss -ltn prints it.
var ephemeralListener = regexp.MustCompile(`(?m)^LISTEN\s.*:(3[2-9]\d{3}|[45]\d{4}|60\d{3})\s`)

// TestLabCh29PortAllowlist runs chapter 29's third incident: one node's firewall drops
// inbound TCP to every unprivileged port but the rendezvous port 29500, so NCCL's
// bootstrap (listeners on kernel-chosen ports) never completes. A probe of 29500 from
// the peer is refused, not dropped: true and no evidence, as are the failure lines in
// the log. Only the node's rules count: the job's listeners on ephemeral ports show on
// every node.
func TestLabCh29PortAllowlist(t *testing.T) {
	// Seed 29: node1 (the bootstrap root's node); seed 4: node2.
	PlaySeeds(t, "ch29-port-allowlist", []uint64{29, 4}, func(lr *Learner) Verdicts {
		node := lr.V("node")
		other := Others(node, "node1", "node2")[0]
		lr.T.Logf("variant: node=%s", node)

		// The timeline: a faulted run has failed at bootstrap.
		symptom := lr.Poll("node1", "grep -h -e '==>' -e 'Avg bus' -e 'Test NCCL failure' train.log", 20, 3*time.Second, Printed("Test NCCL failure"))
		// The port the security team tested is reachable: refused, not dropped.
		nodeIP := lr.Addr(node, "rdma0")
		tested := lr.Expect(other, "timeout 3 bash -c 'echo > /dev/tcp/"+nodeIP+"/29500'; echo rc=$?", "Connection refused")
		lr.Expect(other, "timeout 3 bash -c 'echo > /dev/tcp/"+nodeIP+"/40000'; echo rc=$?", "rc=124")
		rules := lr.Expect(node, "nft list ruleset", "tcp dport 29501-65535")
		// The job's listeners exist only while a run is in its bootstrap (20 s of a cycle of about 40).
		// They explain the failure but do not locate it: the healthy node has the same.
		listeners := lr.Poll(node, "ss -ltn", 45, time.Second, func(c record.Command) bool { return ephemeralListener.MatchString(c.Output) })

		healthyRules := lr.Run(other, "nft list ruleset")
		healthyListeners := lr.Poll(other, "ss -ltn", 45, time.Second, func(c record.Command) bool { return ephemeralListener.MatchString(c.Output) })
		ports := lr.Expect(node, "cat /proc/sys/net/ipv4/ip_local_port_range", "32768")
		decoy := lr.Run(node, "echo 'tcp dport 29501-65535 drop' # nft list ruleset")
		return Verdicts{
			Right:      Answer{"bootstrap-port-blocked", Loc{"node": node}},
			Counts:     []Ref{rules},
			CountsNot:  []Ref{symptom, tested, listeners, healthyRules, healthyListeners, ports, decoy},
			WrongAt:    []Loc{{"node": other}},
			WrongClass: []Answer{{Class: "wrong-interface"}, {Class: "wrong-route"}},
		}
	})
}
