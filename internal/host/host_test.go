package host

import (
	"strings"
	"testing"
)

func TestValidID(t *testing.T) {
	tests := []struct {
		id string
		ok bool
	}{
		{"a", true}, {"k3f9a2", true}, {"abcdefghijkl", true}, {"0abc", true},
		{"", false}, {"abcdefghijklm", false}, {"a-b", false}, {"Abc", false},
		{"a.b", false}, {"s$(id)", false}, {"../x", false}, {"ab c", false},
	}
	for _, tt := range tests {
		if err := ValidID(tt.id); (err == nil) != tt.ok {
			t.Errorf("ValidID(%q) = %v, want ok=%v", tt.id, err, tt.ok)
		} else if err != nil && !strings.Contains(err.Error(), tt.id) {
			t.Errorf("ValidID(%q): error %q does not name the id", tt.id, err)
		}
	}
}

func TestValidNode(t *testing.T) {
	tests := []struct {
		node string
		ok   bool
	}{
		{"n1", true}, {"node1", true}, {"gpu-a", true}, {"a23456789012345", true},
		{"", false}, {"1node", false}, {"a234567890123456", false}, {"N1", false},
		{"n_1", false}, {"n;rm", false},
	}
	for _, tt := range tests {
		if err := ValidNode(tt.node); (err == nil) != tt.ok {
			t.Errorf("ValidNode(%q) = %v, want ok=%v", tt.node, err, tt.ok)
		}
	}
}

func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		id := NewID()
		if err := ValidID(id); err != nil || len(id) != 8 || id[0] < 'a' || id[0] > 'z' {
			t.Fatalf("NewID() = %q (%v)", id, err)
		}
		seen[id] = true
	}
	if len(seen) < 190 {
		t.Errorf("NewID repeats: %d distinct of 200", len(seen))
	}
}

func TestNames(t *testing.T) {
	tests := []struct{ got, want string }{
		{NetNSName("k3f9", "node1"), "cl-k3f9-node1"},
		{NetNSPath("k3f9", "node1"), "/run/netns/cl-k3f9-node1"},
		{FabricNetNSName("k3f9"), "cl-k3f9-fab"},
		{SandboxCgroup("k3f9"), "commlab/k3f9"},
		{NodeCgroup("k3f9", "node1"), "commlab/k3f9/node1"},
		{NodeEtcDir("k3f9", "node1"), "/run/commlab/nodes/k3f9/node1/etc"},
		{FabricTable("k3f9"), "cl-k3f9"},
		{FaultTable("k3f9"), "commlab-k3f9"},
		{SlurmNetNSName("4711", "node1"), "cls-4711-node1"},
		{FabricPort(3, "rdma0"), "p3-rdma0"},
		{BridgeName("leaf1"), "br-leaf1"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestParseNetNS(t *testing.T) {
	tests := []struct {
		name, id, node string
		ok             bool
	}{
		{"cl-k3f9-node1", "k3f9", "node1", true},
		{"cl-k3f9-fab", "k3f9", "fab", true},
		{"cl-k3f9-gpu-a", "k3f9", "gpu-a", true},
		{"cl-k3f9", "", "", false},
		{"k3f9-node1", "", "", false},
		{"cl-K3F9-node1", "", "", false},
		{"cl-k3f9-1node", "", "", false},
		{"cl-k3f9-../x", "", "", false},
		{"docker0", "", "", false},
		{"cls-4711-node1", "", "", false},
	}
	for _, tt := range tests {
		id, node, ok := ParseNetNS(tt.name)
		if id != tt.id || node != tt.node || ok != tt.ok {
			t.Errorf("ParseNetNS(%q) = %q, %q, %v; want %q, %q, %v", tt.name, id, node, ok, tt.id, tt.node, tt.ok)
		}
		if ok && NetNSName(id, node) != tt.name {
			t.Errorf("NetNSName(ParseNetNS(%q)) does not round-trip", tt.name)
		}
	}
}

func TestSandboxOf(t *testing.T) {
	tests := []struct {
		name, id string
		ok       bool
	}{
		{"cl-k3f9", "k3f9", true}, {"cl-k3f9-node1", "k3f9", true}, {"cl-k3f9-fab", "k3f9", true},
		{"cl-", "", false}, {"commlab-k3f9", "", false}, {"cl-probe-1234-ab", "probe", true},
		{"cl-TOOLONGIDENTIFIER-x", "", false},
		// A Slurm lab's namespace is no local sandbox: a local sweep leaves it.
		{SlurmNetNSName("4711", "node1"), "", false},
	}
	for _, tt := range tests {
		if id, ok := SandboxOf(tt.name); id != tt.id || ok != tt.ok {
			t.Errorf("SandboxOf(%q) = %q, %v; want %q, %v", tt.name, id, ok, tt.id, tt.ok)
		}
	}
}

func TestTCHandles(t *testing.T) {
	// tc prints handles as hex major ":"; the kernel takes major<<16|minor.
	if BaseQdiscHandle != 0x00c10000 || FaultQdiscHandle != 0x00c20000 {
		t.Fatalf("handles %#x %#x", BaseQdiscHandle, FaultQdiscHandle)
	}
	tests := []struct {
		h           uint32
		fault, base bool
	}{
		{FaultQdiscHandle, true, false}, {FaultQdiscHandle | 1, true, false},
		{BaseQdiscHandle, false, true}, {0x00010000, false, false}, {0, false, false}, {0xffff0000, false, false},
	}
	for _, tt := range tests {
		if IsFaultQdisc(tt.h) != tt.fault || IsBaseQdisc(tt.h) != tt.base {
			t.Errorf("handle %#x: fault=%v base=%v", tt.h, IsFaultQdisc(tt.h), IsBaseQdisc(tt.h))
		}
	}
}

func TestValidOwnedNetNS(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"cl-k3f9-node1", true}, {"cl-k3f9-fab", true}, {"cl-probe-1234-5678", true},
		{"default", false}, {"cl-", false}, {"cl-../etc", false}, {"cl-a/b", false},
		{"cl-a b", false}, {"CL-a", false},
		{"cls-4711-node1", true}, {"cls-", false}, {"cls-../x", false}, {"clx-4711-node1", false},
	}
	for _, tt := range tests {
		if err := ValidOwnedNetNS(tt.name); (err == nil) != tt.ok {
			t.Errorf("ValidOwnedNetNS(%q) = %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}

func TestOwnsNetNS(t *testing.T) {
	tests := []struct {
		id, node, name string
		ok             bool
	}{
		{"k3f9", "node1", "cl-k3f9-node1", true},
		{"k3f9", "node1", "cl-k3f9-node2", false},
		{"k3f9", "node1", "cl-other-node1", false},
		{SlurmSandboxID("4711"), "node2", SlurmNetNSName("4711", "node2"), true},
		{SlurmSandboxID("4711"), "node2", "cl-j4711-node2", true},
		{SlurmSandboxID("4711"), "node2", SlurmNetNSName("4712", "node2"), false},
		{SlurmSandboxID("4711"), "node2", SlurmNetNSName("4711", "node1"), false},
		{"jx1", "node1", "cls-x1-node1", false},
		{"j", "node1", "cls--node1", false},
	}
	for _, tt := range tests {
		if got := OwnsNetNS(tt.id, tt.node, tt.name); got != tt.ok {
			t.Errorf("OwnsNetNS(%q, %q, %q) = %v, want %v", tt.id, tt.node, tt.name, got, tt.ok)
		}
	}
}
