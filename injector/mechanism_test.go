package injector

import (
	"os"
	"strings"
	"testing"
)

// TestMechanism: every built-in kind says how it is applied, and what a host
// lacks shows as "none here" rather than a mechanism it does not have.
func TestMechanism(t *testing.T) {
	bare := Features{}
	full := Features{TBF: true, Netem: true, Mirred: true, Nftables: true, Cgroup: "v2"}
	for _, k := range Builtin() {
		if m := Mechanism(k.Name, full); m == "" || strings.HasPrefix(m, "none here") && k.Name != "corrupt" {
			t.Errorf("%s on a full host: %q", k.Name, m)
		}
	}
	for _, tc := range []struct{ kind, want string }{
		{"loss", "none here: needs nftables"},
		{"nic-rate", "none here: needs sch_tbf"},
		{"cpu-squeeze", "none here: no cgroup"},
	} {
		if m := Mechanism(tc.kind, bare); !strings.Contains(m, tc.want) {
			t.Errorf("%s on a bare host: %q, want %q", tc.kind, m, tc.want)
		}
	}
	if os.Geteuid() == 0 {
		m := Mechanism("corrupt", bare)
		if (TCBPF() == nil) != strings.HasPrefix(m, "tc BPF at clsact") {
			t.Errorf("corrupt: %q with TCBPF() = %v", m, TCBPF())
		}
		// Without netem, delay and jitter use the wire where tc BPF loads.
		for _, k := range []string{"delay", "jitter"} {
			m := Mechanism(k, bare)
			if (TCBPF() == nil) != strings.HasPrefix(m, "userspace wire (AF_PACKET") {
				t.Errorf("%s: %q with TCBPF() = %v", k, m, TCBPF())
			}
		}
	}
	if m := Mechanism("delay", full); !strings.HasPrefix(m, "sch_netem") {
		t.Errorf("delay with netem: %q, want sch_netem", m)
	}
}
