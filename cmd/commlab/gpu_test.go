package main

import (
	"strings"
	"testing"

	"github.com/commlab/commlab/gpu"
)

// Without the NVIDIA driver (CI), gpu topo and gpu health say so and exit 2.
func TestGPUCommandsWithoutDriver(t *testing.T) {
	if n, err := gpu.Open(); err == nil {
		n.Close()
		t.Skip("this host has an NVIDIA driver")
	}
	for _, args := range [][]string{{"gpu", "topo"}, {"gpu", "health"}, {"gpu", "inventory"}, {"gpu", "pcie"}, {"gpu", "nccl-test"}} {
		code := -1
		old := gpuExit
		gpuExit = func(c int) { code = c }
		out, err := run(t, args...)
		gpuExit = old
		if code != 2 {
			t.Errorf("%v: exit status %d, want 2 (err %v)", args, code, err)
		}
		want := "commlab: no NVIDIA driver: libnvidia-ml.so.1 not found (GPU labs need a GPU node)"
		if !strings.Contains(out, want) {
			t.Errorf("%v: output %q, want %q", args, out, want)
		}
	}
}

// nccl-log explain reads a file and explains what it finds.
func TestNCCLLogExplain(t *testing.T) {
	out, err := run(t, "nccl-log", "explain", "../../nccl/testdata/public/socket-abort.log")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"warnings (4)", "ncclSystemError(2)", "means: a rank could not open a TCP connection"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, err := run(t, "nccl-log", "explain", "no-such-file.log"); err == nil || !strings.Contains(err.Error(), "no-such-file.log") {
		t.Errorf("missing file: err %v", err)
	}
}
