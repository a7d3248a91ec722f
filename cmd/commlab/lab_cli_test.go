package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/commlab/commlab/labs/netns"

	"github.com/commlab/commlab/internal/testenv"
	"github.com/commlab/commlab/internal/testlab"
)

// labCLI runs `commlab --data data lab args...` in process.
func labCLI(t *testing.T, data string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := newRootCmd()
	root.SetArgs(append([]string{"--data", data, "lab"}, args...))
	root.SetOut(&out)
	root.SetErr(&out)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func TestLabPlan(t *testing.T) {
	out, err := labCLI(t, t.TempDir(), "plan", "4x2", "--index", "3")
	if err != nil {
		t.Fatalf("lab plan 4x2: %v\n%s", err, out)
	}
	for _, want := range []string{"slot 3: 198.18.12.0/22", "node4      rdma1    rail1    data       198.18.12.132/26   200Mbit  1500"} {
		if !strings.Contains(out, want) {
			t.Errorf("lab plan output lacks %q:\n%s", want, out)
		}
	}
	bad := t.TempDir() + "/bad.yaml"
	if err := os.WriteFile(bad, []byte("name: x\nswitches: [{name: s, rate: 0Mbit}]\nnodes: [{name: \"a b\"}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = labCLI(t, t.TempDir(), "plan", bad)
	if err == nil || !strings.Contains(err.Error(), bad+":2:") || !strings.Contains(err.Error(), bad+":3:") {
		t.Errorf("lab plan of a bad file = %v; want errors at lines 2 and 3", err)
	}
	if _, err := labCLI(t, t.TempDir(), "plan", "9x9"); err == nil || !strings.Contains(err.Error(), "2-node-rail") {
		t.Errorf("lab plan 9x9 = %v; want the list of built-ins", err)
	}
}

// TestLabUpListDown drives a detached sandbox through the CLI.
func TestLabUpListDown(t *testing.T) {
	testenv.RequireRoot(t, "network namespaces")
	data := t.TempDir()
	id := "tc" + netns.NewID()[2:]
	t.Cleanup(func() {
		_, _ = labCLI(t, data, "down", id)
		assertGone(t, id)
	})
	out, err := labCLI(t, data, "up", "2x1", "--detach", "--id", id, "--ttl", "5m", "--pids", "256", "--memory", "512MiB")
	if err != nil {
		t.Fatalf("lab up: %v\n%s", err, out)
	}
	if !strings.Contains(out, "sandbox "+id+" up") || !strings.Contains(out, "commlab lab shell "+id+" node1") {
		t.Errorf("lab up output:\n%s", out)
	}
	ns, _ := exec.Command("ip", "netns", "list").CombinedOutput()
	if !strings.Contains(string(ns), "cl-"+id+"-node1") {
		t.Errorf("ip netns list lacks cl-%s-node1:\n%s", id, ns)
	}
	if pids, _ := os.ReadFile("/sys/fs/cgroup/pids/commlab/" + id + "/pids.max"); len(pids) > 0 && strings.TrimSpace(string(pids)) != "256" {
		t.Errorf("pids.max = %q, want 256", pids)
	}
	out, err = labCLI(t, data, "list")
	if err != nil || !strings.Contains(out, id) || !strings.Contains(out, "detached") {
		t.Errorf("lab list: %v\n%s", err, out)
	}
	// A fault on the sandbox goes with it: `faults` lists it no longer.
	if out, err := cli(t, data, "inject", "--sandbox", id, "--node", "node1", "--kind", "nic-down", "--nic", "rdma0", "--ttl", "5m"); err != nil {
		t.Fatalf("inject: %v\n%s", err, out)
	}
	out, err = labCLI(t, data, "down", id)
	if err != nil || !strings.Contains(out, "sandbox "+id+" removed") {
		t.Errorf("lab down: %v\n%s", err, out)
	}
	if out, err := cli(t, data, "faults"); err != nil || strings.Contains(out, id) {
		t.Errorf("faults after lab down (%v) still lists the sandbox's fault:\n%s", err, out)
	}
	ns, _ = exec.Command("ip", "netns", "list").CombinedOutput()
	if strings.Contains(string(ns), "cl-"+id+"-") {
		t.Errorf("namespaces left after lab down:\n%s", ns)
	}
	if _, err := labCLI(t, data, "down", id); err == nil || !strings.Contains(err.Error(), "no such sandbox") {
		t.Errorf("second lab down = %v", err)
	}
	if _, err := labCLI(t, data, "up", "2x1", "--memory", "lots"); err == nil || !strings.Contains(err.Error(), "--memory") {
		t.Errorf("lab up --memory lots = %v", err)
	}
}

// assertGone fails the test if anything of sandbox id is left on the host.
func assertGone(t *testing.T, id string) {
	t.Helper()
	if left := testlab.Leftovers(id); len(left) > 0 {
		t.Errorf("sandbox %s left:\n%s", id, strings.Join(left, "\n"))
	}
}
