package slurm

import (
	"cmp"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/labs/topology"
)

func TestScript(t *testing.T) {
	c := &Config{Partition: "gpu", Account: "ml", QoS: "lab", Reservation: "ws1", AgentURL: "ws://x/agent"}
	tests := []struct {
		name     string
		spec     JobSpec
		want     []string
		wantNot  []string
		minutes  string
		gresName string
	}{
		{"two nodes, no GPUs", JobSpec{Lab: "ab12", Nodes: []string{"node1", "node2"}, TTL: 30 * time.Minute, Agent: "/opt/commlab"},
			[]string{"#SBATCH --job-name=commlab-ab12\n", "#SBATCH --nodes=2\n", "#SBATCH --ntasks-per-node=1\n", "#SBATCH --time=32\n",
				"#SBATCH --partition=gpu\n", "#SBATCH --account=ml\n", "#SBATCH --qos=lab\n", "#SBATCH --reservation=ws1\n",
				"exec srun --kill-on-bad-exit=0 --ntasks-per-node=1 '/opt/commlab' agent\n"},
			[]string{"--gres", "--exclusive", "TOKEN"}, "", ""},
		{"GPUs and host NICs", JobSpec{Lab: "cd34", Nodes: []string{"a"}, GPUs: 8, Exclusive: true, TTL: 90 * time.Second, Agent: "/it's"},
			[]string{"#SBATCH --gres=gpu:8\n", "#SBATCH --exclusive\n", "#SBATCH --time=4\n", `'/it'\''s' agent`}, nil, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := c.Script(tt.spec)
			for _, w := range tt.want {
				if !strings.Contains(s, w) {
					t.Errorf("script lacks %q:\n%s", w, s)
				}
			}
			for _, w := range tt.wantNot {
				if strings.Contains(s, w) {
					t.Errorf("script has %q:\n%s", w, s)
				}
			}
		})
	}
}

func TestLoadConfig(t *testing.T) {
	tests := []struct {
		name, yaml, err string
		nilConfig       bool
	}{
		{"full", "cluster:\n  partition: gpu\n  account: ml\n  gres: gpu\n  lab_nics: [ens1f0]\n  agent_url: wss://login1:8443/agent\n  grace: 5m\n" +
			"  tls: {cert: /etc/commlab/agent.crt, key: /etc/commlab/agent.key, ca: /etc/commlab/ca.pem}\n", "", false},
		{"tls with ws", "cluster:\n  agent_url: ws://login1:8081/agent\n  tls: {cert: a, key: b}\n", "must be wss://", false},
		{"no section", "other: 1\n", "", true},
		{"option injection", "cluster:\n  partition: \"gpu --uid=0\"\n  agent_url: ws://x/agent\n", `partition "gpu --uid=0"`, false},
		{"no agent url", "cluster:\n  partition: gpu\n", "agent_url is required", false},
		{"unknown key", "cluster:\n  partiton: gpu\n", "partiton", false},
		{"http agent url", "cluster:\n  agent_url: http://login1:8081/agent\n", "want ws://", false},
		{"agent url without a port", "cluster:\n  agent_url: ws://login1/agent\n", "has no port", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "commlab.yaml")
			if err := os.WriteFile(p, []byte(tt.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			c, err := LoadConfig(p)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), p) {
					t.Fatalf("err = %v, want one naming %s and %q", err, p, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (c == nil) != tt.nilConfig {
				t.Fatalf("config = %+v, want nil: %v", c, tt.nilConfig)
			}
			if c != nil && (c.Partition != "gpu" || c.Grace != 5*time.Minute || len(c.LabNICs) != 1 || c.TLS == nil || c.TLS.CA != "/etc/commlab/ca.pem") {
				t.Fatalf("config = %+v", c)
			}
		})
	}
}

func TestAgentFromEnv(t *testing.T) {
	base := map[string]string{EnvURL: "ws://h/agent", EnvToken: "t", EnvLab: "l", EnvNodes: "node1,node2", "SLURM_JOB_ID": "42", "SLURM_NODEID": "1"}
	tests := []struct {
		name     string
		change   map[string]string
		node, in string
		err      string
	}{
		{"second node", nil, "node2", "", ""},
		{"no token", map[string]string{EnvToken: ""}, "", "", EnvToken},
		{"node id past the nodes", map[string]string{"SLURM_NODEID": "2"}, "", "", "want 0 to 1"},
		{"bad node name", map[string]string{EnvNodes: "node1,Node/2"}, "", "", "node \"Node/2\""},
		{"bad job id", map[string]string{"SLURM_JOB_ID": "4;2"}, "", "", "SLURM_JOB_ID"},
		{"lab NICs and a slice", map[string]string{EnvLabNICs: "fab0,fab1", EnvAddrIndex: "3"}, "node2", "", ""},
		{"slice past the block", map[string]string{EnvAddrIndex: "128"}, "", "", "COMMLAB_ADDR_INDEX \"128\": want 0 to 127"},
		{"bad lab NIC", map[string]string{EnvLabNICs: "fab0,a b"}, "", "", `COMMLAB_LAB_NICS: "a b" is not an interface name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tt.change {
				env[k] = v
			}
			a, err := AgentFromEnv(func(k string) string { return env[k] })
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if a.Node != tt.node || a.netns() != "cls-42-"+tt.node || a.target().NetNS != a.netns() {
				t.Fatalf("node %s netns %s", a.Node, a.netns())
			}
			got := fmt.Sprintf("%d %v", a.AddrIndex, a.LabNICs)
			want := fmt.Sprintf("%s %v", cmp.Or(tt.change[EnvAddrIndex], "0"), strings.Fields(strings.ReplaceAll(tt.change[EnvLabNICs], ",", " ")))
			if got != want {
				t.Errorf("slice and lab NICs %s, want %s", got, want)
			}
		})
	}
}

func TestQueueStateString(t *testing.T) {
	tests := []struct {
		q    QueueState
		want string
		gone bool
	}{
		{QueueState{State: "PENDING", Reason: "Resources"}, "Slurm job pending (Resources)", false},
		{QueueState{State: "PENDING", Reason: "Priority", Position: 3}, "Slurm job pending (Priority), position 3 in the queue", false},
		{QueueState{State: "RUNNING", Reason: "None", Nodes: "node[1-2]"}, "Slurm job running on node[1-2]", false},
		{QueueState{State: "COMPLETING"}, "Slurm job completing", false},
		{QueueState{State: "TIMEOUT"}, "Slurm job timeout", true},
		{QueueState{}, "Slurm job ", true},
	}
	for _, tt := range tests {
		if got := tt.q.String(); got != tt.want || tt.q.Gone() != tt.gone {
			t.Errorf("%+v: %q gone %v, want %q gone %v", tt.q, got, tt.q.Gone(), tt.want, tt.gone)
		}
	}
}

func TestPosition(t *testing.T) {
	tests := []struct {
		ids, job string
		want     int
	}{
		{"17\n12\n40\n", "40", 3},
		{"17\n", "17", 1},
		{"170\n17\n", "17", 2},
		{"", "17", 0},
	}
	for _, tt := range tests {
		if got := position(tt.ids, tt.job); got != tt.want {
			t.Errorf("position(%q, %s) = %d, want %d", tt.ids, tt.job, got, tt.want)
		}
	}
}

func TestListen(t *testing.T) {
	tests := []struct{ url, listen, want string }{
		{"ws://login1:8081/agent", "", ":8081"},
		{"wss://login1.example.org:8443/agent", "127.0.0.1:9000", "127.0.0.1:9000"},
	}
	for _, tt := range tests {
		c := &Config{AgentURL: tt.url, AgentListen: tt.listen}
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		if got := c.Listen(); got != tt.want {
			t.Errorf("Listen() for %s, %q = %q, want %q", tt.url, tt.listen, got, tt.want)
		}
	}
}

// TestNodeNICs: the agent gives its node the topology's NICs, in the lab's
// address slice, each on the lab NIC of its switch (k mod the lab NICs).
func TestNodeNICs(t *testing.T) {
	tests := []struct {
		topo, node string
		index      int
		addrs      int
		labNICs    []string
		want       string
		err        string
	}{
		{"2x1", "node2", 1, 0, nil, "eth0 198.18.0.2/26 1500 25Mbit<-, rdma0 198.18.0.66/26 1500 200Mbit<-", ""},
		{"2x1", "node1", 0, 1, []string{"fab0"}, "eth0 198.18.4.1/26 1500 25Mbit<fab0, rdma0 198.18.4.65/26 1500 200Mbit<fab0", ""},
		{"2x1", "node1", 0, 0, []string{"fab0", "fab1"}, "eth0 198.18.0.1/26 1500 25Mbit<fab0, rdma0 198.18.0.65/26 1500 200Mbit<fab1", ""},
		{"", "node2", 1, 2, nil, "eth0 198.18.8.2/26 1500 0bit<-", ""},
		{"2x1", "node9", 0, 0, nil, "", "has no node node9"},
		{"nosuch", "node1", 0, 0, nil, "", "nosuch"},
	}
	for _, tt := range tests {
		a := &Agent{Topology: tt.topo, Node: tt.node, Index: tt.index, AddrIndex: tt.addrs, LabNICs: tt.labNICs}
		nics, err := a.nics()
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s/%s: err %v, want %q", tt.topo, tt.node, err, tt.err)
			}
			continue
		}
		var got []string
		for _, n := range nics {
			got = append(got, fmt.Sprintf("%s %s %d %s<%s", n.Name, n.Addr, n.MTU, n.Rate, cmp.Or(n.Parent, "-")))
		}
		if strings.Join(got, ", ") != tt.want {
			t.Errorf("%s/%s: %q, want %q", tt.topo, tt.node, got, tt.want)
		}
	}
}

// TestCheckLabNICs: a lab NIC the node cannot lend as it is, or one the site
// did not list, is refused with the reason; CI's lab NIC (.ci/slurm-up.sh),
// where there is one, is lent to a topology whose MTU it carries.
func TestCheckLabNICs(t *testing.T) {
	tests := []struct {
		listed []string
		parent string
		mtu    int
		want   string // "": lent
	}{
		{[]string{"fab0"}, "eth7", 1500, "NIC eth7 is not one of the site's lab NICs (cluster.lab_nics: fab0)"},
		{[]string{"commlab-nosuch"}, "commlab-nosuch", 1500, "lab NIC commlab-nosuch (cluster.lab_nics) is not on Slurm node"},
		{[]string{"lo"}, "lo", 1500, "is a loopback device"},
		{[]string{ciLabNIC}, ciLabNIC, 1500, ""},
		{[]string{ciLabNIC}, ciLabNIC, 9000, "has MTU 1500, below rdma0's 9000 in the topology"},
	}
	for _, tt := range tests {
		if _, err := net.InterfaceByName(tt.parent); tt.parent == ciLabNIC && err != nil {
			t.Logf("no %s (.ci/slurm-up.sh makes it): skipping MTU %d", ciLabNIC, tt.mtu)
			continue
		}
		a := &Agent{LabNICs: tt.listed}
		err := a.checkLabNICs([]nodeNIC{{NICPlan: topology.NICPlan{NIC: topology.NIC{Name: "rdma0", MTU: tt.mtu}}, Parent: tt.parent}})
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("lab NICs %q, parent %s, MTU %d: %v, want %q", tt.listed, tt.parent, tt.mtu, err, tt.want)
		}
	}
}

// TestLabNICsConfig: cluster.lab_nics takes interface names, each once.
func TestLabNICsConfig(t *testing.T) {
	tests := []struct {
		nics []string
		err  string
	}{
		{[]string{"ens1f0np0", "ens1f1np1"}, ""},
		{[]string{"lo"}, `lab_nics: "lo": want an interface name`},
		{[]string{"eth0;reboot"}, `lab_nics: "eth0;reboot": want an interface name`},
		{[]string{"ens1", "ens1"}, "lab_nics: ens1 listed twice"},
	}
	for _, tt := range tests {
		c := &Config{AgentURL: "ws://login1:8081/agent", LabNICs: tt.nics}
		err := c.Validate()
		if (tt.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.err) {
			t.Errorf("lab_nics %q: %v, want %q", tt.nics, err, tt.err)
		}
	}
}

// TestAddrIndex: each lab up holds an address slice of its own; a freed slice
// is taken again, and past the last one a lab is refused.
func TestAddrIndex(t *testing.T) {
	p := &Provider{}
	for want := range 3 {
		if got, err := p.takeAddrIndex(); err != nil || got != want {
			t.Fatalf("take: %d, %v; want %d", got, err, want)
		}
	}
	p.freeAddrIndex(1)
	if got, _ := p.takeAddrIndex(); got != 1 {
		t.Errorf("take after freeing 1: %d", got)
	}
	for range topology.MaxSandboxes - 3 {
		if _, err := p.takeAddrIndex(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.takeAddrIndex(); err == nil || !strings.Contains(err.Error(), "every address slice is taken") {
		t.Errorf("take with all %d held: %v", topology.MaxSandboxes, err)
	}
}
