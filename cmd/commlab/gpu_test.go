package main

import (
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/gpu"
)

// Without the NVIDIA driver (CI), gpu topo and gpu health say so and exit 2.
func TestGPUCommandsWithoutDriver(t *testing.T) {
	if n, err := gpu.Open(); err == nil {
		n.Close()
		t.Skip("this host has an NVIDIA driver")
	}
	for _, args := range [][]string{{"gpu", "topo"}, {"gpu", "health"}, {"gpu", "inventory"}, {"gpu", "pcie"}, {"gpu", "nccl-test"}, {"gpu", "check"}} {
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

// TestCheckTable: the GPU check's table aligns its columns and says "-" for no time.
func TestCheckTable(t *testing.T) {
	var b strings.Builder
	rows := []checkRow{
		{Check: "gpu pcie", Result: "pass", Took: 6100 * time.Millisecond, Figure: "pinned H2D 53.1 GB/s"},
		{Check: "lab ch10-nvlink-p2p-off", Result: "skip", Figure: "needs 2 GPUs in one node, this node has 1"},
	}
	if err := writeCheckTable(&b, rows); err != nil {
		t.Fatal(err)
	}
	want := "check                    result  time   figure\n" +
		"gpu pcie                 pass    6.1 s  pinned H2D 53.1 GB/s\n" +
		"lab ch10-nvlink-p2p-off  skip    -      needs 2 GPUs in one node, this node has 1\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
	if got := string(stdoutOnly([]byte("commlab: ran script on 1 GPU(s)\n{\"a\": 1}"))); got != `{"a": 1}` {
		t.Errorf("stdoutOnly = %q", got)
	}
}
