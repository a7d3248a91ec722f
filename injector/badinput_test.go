//go:build linux

package injector

import (
	"errors"
	"github.com/commlab/commlab/internal/hostns"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// badCase is one bad input and what its error must say.
type badCase struct {
	name   string
	target Target
	kind   string
	params map[string]string
	ttl    time.Duration
	want   string
}

// checkBad applies each case: it must be an ErrInvalid error naming the culprit,
// and nothing is applied or journaled (the journal file is not even created).
func checkBad(t *testing.T, in *Injector, cases []badCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := applyText(t, in, tc.target, tc.kind, tc.params, tc.ttl)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v, want an ErrInvalid error", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if _, err := os.Stat(in.j.path()); err == nil {
				t.Errorf("journal file written for bad input")
			}
		})
	}
}

// TestBadParams: input refused by its syntax alone, before the injector looks at
// the host, so no root and no sandbox are needed. The target's sandbox does not
// exist: a case that reached the host would fail with "does not exist" instead.
func TestBadParams(t *testing.T) {
	reg, err := NewRegistry(Builtin()...)
	if err != nil {
		t.Fatal(err)
	}
	in, err := Open(Options{DataDir: t.TempDir(), Registry: reg, Features: &Features{}})
	if err != nil {
		t.Fatal(err)
	}
	good := Target{Sandbox: "nolab0", Node: "n1", Cgroup: "commlab/nolab0/n1"}
	checkBad(t, in, []badCase{
		{"unknown kind", good, "nic-rat", map[string]string{"nic": "rdma0"}, time.Minute, `unknown fault kind "nic-rat"`},
		{"unknown parameter", good, "nic-rate", map[string]string{"nic": "rdma0", "rate": "1mbit", "burst": "1k"}, time.Minute, `no parameter "burst"`},
		{"rate zero", good, "nic-rate", map[string]string{"nic": "rdma0", "rate": "0mbit"}, time.Minute, "rate 0bit: want between"},
		{"rate too high", good, "nic-rate", map[string]string{"nic": "rdma0", "rate": "1tbit"}, time.Minute, "rate 1000gbit: want between"},
		{"rate without unit", good, "nic-rate", map[string]string{"nic": "rdma0", "rate": "100"}, time.Minute, "want a number with a unit"},
		{"rate in bytes", good, "nic-rate", map[string]string{"nic": "rdma0", "rate": "100mbps"}, time.Minute, "bytes per second"},
		{"missing parameter", good, "nic-rate", map[string]string{"nic": "rdma0"}, time.Minute, `needs parameter "rate"`},
		{"loss zero", good, "loss", map[string]string{"nic": "rdma0", "percent": "0%"}, time.Minute, "want 0.01% to 100%"},
		{"loss without %", good, "loss", map[string]string{"nic": "rdma0", "percent": "0.5"}, time.Minute, "with a % sign"},
		{"loss too fine", good, "loss", map[string]string{"nic": "rdma0", "percent": "0.005%"}, time.Minute, "finest step is 0.01%"},
		{"namespace not commlab's", Target{Sandbox: "nolab0", Node: "n1", NetNS: "default"}, "nic-down", map[string]string{"nic": "eth0"}, time.Minute, "cl-..."},
		{"sandbox missing", Target{Sandbox: "nosuch", Node: "n1"}, "nic-down", map[string]string{"nic": "eth0"}, time.Minute, "does not exist"},
		{"NIC with metacharacters", good, "nic-down", map[string]string{"nic": "rdma0;reboot"}, time.Minute, `nic "rdma0;reboot"`},
		{"NIC with spaces", good, "mtu-mismatch", map[string]string{"nic": "rdma0 up", "mtu": "1400"}, time.Minute, `nic "rdma0 up"`},
		{"sandbox with metacharacters", Target{Sandbox: "s$(id)", Node: "n1"}, "nic-down", map[string]string{"nic": "eth0"}, time.Minute, `sandbox id "s$(id)"`},
		{"sandbox id with '-'", Target{Sandbox: "s-1", Node: "n1"}, "nic-down", map[string]string{"nic": "eth0"}, time.Minute, `sandbox id "s-1"`},
		{"node with a slash", Target{Sandbox: "nolab0", Node: "../n1"}, "nic-down", map[string]string{"nic": "eth0"}, time.Minute, `node "../n1"`},
		{"cgroup outside commlab", Target{Sandbox: "nolab0", Node: "n1", Cgroup: "system.slice"}, "cpu-squeeze", map[string]string{"cpus": "0.5"}, time.Minute, "under commlab/"},
		{"cgroup escaping", Target{Sandbox: "nolab0", Node: "n1", Cgroup: "commlab/../system.slice"}, "cpu-squeeze", map[string]string{"cpus": "0.5"}, time.Minute, "not a plain name"},
		{"env value with a command", good, "env-force", map[string]string{"vars": "NCCL_ALGO=$(reboot)"}, time.Minute, "may only hold"},
		{"env file escaping", good, "env-force", map[string]string{"vars": "A=1", "file": "../../passwd"}, time.Minute, "'..' is not allowed"},
		{"etc dir is the host's", Target{Sandbox: "nolab0", Node: "n1", EtcDir: "/etc"}, "env-force", map[string]string{"vars": "A=1"}, time.Minute, "other than the host's /etc"},
		{"default route", good, "wrong-route", map[string]string{"to": "0.0.0.0/0", "nic": "eth0"}, time.Minute, "default route"},
		{"route to its own NIC", good, "wrong-route", map[string]string{"to": "eth0", "nic": "eth0"}, time.Minute, "already leaves through it"},
		{"route to neither prefix nor NIC", good, "wrong-route", map[string]string{"to": "rdma0;reboot", "nic": "eth0"}, time.Minute, "or a NIC such as rdma0"},
		{"ttl zero", good, "nic-down", map[string]string{"nic": "rdma0"}, 0, "ttl 0s"},
		{"ttl too long", good, "nic-down", map[string]string{"nic": "rdma0"}, 30 * 24 * time.Hour, "ttl 720h0m0s"},
		{"flap duty 100%", good, "nic-flap", map[string]string{"nic": "rdma0", "duty": "100%"}, time.Minute, "want 1% to 99%"},
	})
}

// TestBadInput: bad input checked once the target is resolved (a NIC or node the
// sandbox does not have, a cl- name bound to the host's own namespace, CPUs and
// senders checked against the host) is refused the same way, and
// the sandbox is left exactly as it was.
func TestBadInput(t *testing.T) {
	l := newLab(t, 1500, "n1")
	in := newInjector(t)
	// A cl- name that leads to the host's own namespace must be refused too.
	hostAlias := "cl-" + l.ID + "-hostalias"
	p := filepath.Join(netnsDir, hostAlias)
	if err := os.WriteFile(p, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := bindMount("/proc/self/ns/net", p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hostns.Delete(hostAlias) })
	good := l.target("n1")
	base := l.snapshot(t, "n1")
	checkBad(t, in, []badCase{
		{"NIC not in the sandbox", good, "nic-rate", map[string]string{"nic": "rdma7", "rate": "1mbit"}, time.Minute, `has no NIC "rdma7" (it has: eth0, rdma0)`},
		{"host namespace", Target{Sandbox: l.ID, Node: "hostalias"}, "nic-down", map[string]string{"nic": "eth0"}, time.Minute, "host's own namespace"},
		{"another sandbox's namespace", Target{Sandbox: l.ID, Node: "n1", NetNS: "cl-other-n1"}, "nic-down", map[string]string{"nic": "eth0"}, time.Minute, "is not node " + l.ID + "/n1's namespace cl-" + l.ID + "-n1"},
		{"another node's namespace", Target{Sandbox: l.ID, Node: "n1", NetNS: l.NetNS("n2")}, "nic-down", map[string]string{"nic": "eth0"}, time.Minute, "is not node"},
		{"another sandbox's cgroup", Target{Sandbox: l.ID, Node: "n1", Cgroup: "commlab/other/n1"}, "cpu-squeeze", map[string]string{"cpus": "0.5"}, time.Minute, "is not under node"},
		{"cpuset offline CPU", good, "cpu-squeeze", map[string]string{"cpuset": "4000"}, time.Minute, "CPU 4000 is not online"},
		{"congestion sender is receiver", good, "congestion", map[string]string{"nic": "rdma0", "senders": "n1", "rate": "10mbit"}, time.Minute, "receiving node itself"},
		{"congestion sender missing", good, "congestion", map[string]string{"nic": "rdma0", "senders": "n9", "rate": "10mbit"}, time.Minute, "does not exist"},
	})
	assertSame(t, "after bad input", base, l.snapshot(t, "n1"))
}

func applyText(t *testing.T, in *Injector, tg Target, kind string, params map[string]string, ttl time.Duration) error {
	f, err := in.Registry().Parse(kind, params)
	if err != nil {
		return err
	}
	_, err = in.Apply(ctxT(t), tg, f, ttl)
	return err
}
