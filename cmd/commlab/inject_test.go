package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/commlab/commlab/injector"
	"github.com/commlab/commlab/labs/netns"

	"github.com/commlab/commlab/internal/testenv"
)

// cli runs `commlab --data data args...` in process.
func cli(t *testing.T, data string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := newRootCmd()
	root.SetArgs(append([]string{"--data", data}, args...))
	root.SetOut(&out)
	root.SetErr(&out)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func inNode(t *testing.T, ns string, argv ...string) string {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"netns", "exec", ns}, argv...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return string(out)
}

// TestInjectCLI drives inject, faults, revert and sweep against a real sandbox.
func TestInjectCLI(t *testing.T) {
	testenv.RequireRoot(t, "network namespaces, tc, nftables")
	data := t.TempDir()
	id := "ti" + netns.NewID()[2:]
	t.Cleanup(func() {
		_, _ = cli(t, data, "sweep")
		_, _ = cli(t, data, "lab", "down", id)
		assertGone(t, id)
	})
	if out, err := cli(t, data, "lab", "up", "2x1", "--detach", "--id", id, "--ttl", "5m"); err != nil {
		t.Fatalf("lab up: %v\n%s", err, out)
	}
	node1 := "cl-" + id + "-node1"
	base := inNode(t, node1, "tc", "qdisc", "show", "dev", "rdma0")

	out, err := cli(t, data, "inject", "--sandbox", id, "--node", "node1", "--kind", "nic-rate", "--nic", "rdma0", "--rate", "50mbit", "--ttl", "10m", "--json")
	if err != nil {
		t.Fatalf("inject: %v\n%s", err, out)
	}
	var e injector.Entry
	if err := json.Unmarshal([]byte(out), &e); err != nil || e.Kind != "nic-rate" || !e.Applied {
		t.Fatalf("inject --json: %v\n%s", err, out)
	}
	if q := inNode(t, node1, "tc", "qdisc", "show", "dev", "rdma0"); !strings.Contains(q, "rate 50Mbit") {
		t.Errorf("tc qdisc after inject:\n%s", q)
	}
	out, err = cli(t, data, "inject", "--sandbox", id, "--node", "node1", "--kind", "port-block", "--ports", "29500", "--ttl", "1m")
	if err != nil || !strings.Contains(out, "equivalent: nft add rule inet commlab-"+id) {
		t.Fatalf("inject port-block: %v\n%s", err, out)
	}
	out, err = cli(t, data, "faults")
	if err != nil || !strings.Contains(out, e.ID) || !strings.Contains(out, "port-block") || !strings.Contains(out, "in 10m") {
		t.Errorf("faults: %v\n%s", err, out)
	}
	if out, err := cli(t, data, "revert", e.ID); err != nil || !strings.Contains(out, "reverted "+e.ID) {
		t.Errorf("revert: %v\n%s", err, out)
	}
	if q := inNode(t, node1, "tc", "qdisc", "show", "dev", "rdma0"); q != base {
		t.Errorf("tc qdisc after revert:\n%s\nwant the lab's base:\n%s", q, base)
	}
	if out, err := cli(t, data, "sweep"); err != nil || !strings.Contains(out, "reverted f") {
		t.Errorf("sweep: %v\n%s", err, out)
	}
	if out := inNode(t, node1, "nft", "list", "ruleset"); out != "" {
		t.Errorf("nft ruleset after sweep:\n%s", out)
	}
	if out, _ := cli(t, data, "faults"); !strings.Contains(out, "no active faults") {
		t.Errorf("faults after sweep:\n%s", out)
	}

	// Bad input: a clear error, nothing journaled.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--kind", "nic-rat"}, `unknown fault kind "nic-rat"`},
		{[]string{"--kind", "nic-rate", "--nic", "rdma0", "--rate", "0mbit"}, "want between"},
		{[]string{"--kind", "nic-rate", "--nic", "wlan0", "--rate", "1mbit"}, `has no NIC "wlan0"`},
		{[]string{"--kind", "loss", "--nic", "rdma0;id", "--percent", "1%"}, `nic "rdma0;id"`},
		{[]string{"--kind", "mtu-mismatch", "--nic", "rdma0", "--mtu", "9000", "--cpus", "1"}, `no parameter "cpus"`},
	} {
		out, err := cli(t, data, append([]string{"inject", "--sandbox", id, "--node", "node1"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("inject %v: %v %s, want %q", c.args, err, out, c.want)
		}
	}
	if out, _ := cli(t, data, "faults", "--json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("faults after bad input: %s", out)
	}
	if _, err := cli(t, data, "revert", "f00000000"); err == nil || !strings.Contains(err.Error(), "no active fault") {
		t.Errorf("revert of an unknown id: %v", err)
	}
}

func TestFaultKindsCLI(t *testing.T) {
	out, err := cli(t, t.TempDir(), "faults", "--kinds")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"nic-rate:", "--rate (required)", "env-force:", "--where (default profile.d)", "shm-small:"} {
		if !strings.Contains(out, want) {
			t.Errorf("faults --kinds lacks %q:\n%s", want, out)
		}
	}
	if os.Geteuid() == 0 && !injector.Probe(context.Background()).Netem && injector.TCBPF() == nil &&
		!strings.Contains(out, "mechanism here: userspace wire (AF_PACKET") {
		t.Errorf("faults --kinds does not say that delay uses the userspace wire here (no sch_netem):\n%s", out)
	}
	if os.Geteuid() == 0 && injector.TCBPF() == nil && !strings.Contains(out, "mechanism here: tc BPF at clsact") {
		t.Errorf("faults --kinds does not say that corrupt uses tc BPF here:\n%s", out)
	}
}
