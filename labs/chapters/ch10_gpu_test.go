package chapters

import (
	"context"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/commlab/commlab/gpu"
	"github.com/commlab/commlab/grader"
	"github.com/commlab/commlab/labs/cgroup"
)

// TestLabCh10GPUH2DThrottled runs chapter 10's GPU-node lab on the host's real GPU:
// the lab's cgroup gets a small CPU quota. A scripted learner measures copies in the
// lab shell, reads the cgroup, and is graded. The same measurement outside the lab, in
// the same run, shows what the fault costs: pageable copies slow down, pinned copies
// (DMA, the PCIe link itself) do not. It needs a GPU node, so CI (no GPU) skips it; the
// lab's CPU-side parts (scenario, environment check, refusal without GPUs) are tested
// in scenarios, labs/backend and web.
func TestLabCh10GPUH2DThrottled(t *testing.T) {
	if _, err := gpu.Count(); err != nil {
		t.Skipf("needs a GPU node: %v", err)
	}
	l := StartLab(t, "ch10-gpu-h2d-throttled", 1)
	t.Logf("variant: cpus=%s", l.Variant.Values["cpus"])

	inLab := TypeAndWait(t, l, "node1", "commlab gpu pcie --sizes 256M --iters 5")
	cmds, _ := MustTerminal(t, l, "node1").Commands()
	t.Logf("in the lab shell:\n%s", cmds[inLab-1].Output)
	lab := copyRates(cmds[inLab-1].Output)
	host := hostPCIe(t)
	for _, m := range []struct{ mode, dir string }{{"pinned", "h2d"}, {"pageable", "h2d"}} {
		k := m.mode + " " + m.dir
		t.Logf("%s: host %.1f GB/s, lab %.1f GB/s (%.2fx)", k, host.Best(m.mode, m.dir), lab[k], lab[k]/host.Best(m.mode, m.dir))
	}
	if r := lab["pageable h2d"] / host.Best("pageable", "h2d"); !(r < 0.7) {
		t.Errorf("pageable H2D in the squeezed lab is %.2fx the host's: the fault does not show", r)
	}
	// The lab's own workload may copy at the same time (the live chart), sharing the link.
	if r := lab["pinned h2d"] / host.Best("pinned", "h2d"); !(r >= 0.6) {
		t.Errorf("pinned H2D in the lab is %.2fx the host's: the link itself looks slow, which this lab does not teach", r)
	}

	dir := "/sys/fs/cgroup/cpu/"
	quotaFile := "cpu.cfs_quota_us"
	if cgroup.Unified() {
		dir, quotaFile = "/sys/fs/cgroup/", "cpu.max"
	}
	quota := TypeAndWait(t, l, "node1", "cat "+dir+quotaFile)
	stat := TypeAndWait(t, l, "node1", "cat "+dir+"cpu.stat")
	decoy := TypeAndWait(t, l, "node1", "nvidia-smi -L")
	cmds, _ = MustTerminal(t, l, "node1").Commands()
	t.Logf("%s:\n%s\n%s:\n%s", quotaFile, cmds[quota-1].Output, "cpu.stat", cmds[stat-1].Output)

	ts, err := l.Transcripts()
	if err != nil {
		t.Fatal(err)
	}
	dry := func(d grader.Diagnosis) grader.Result {
		r, err := grader.Grade(grader.Input{Variant: l.Variant, Diagnosis: d, Transcripts: ts})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	loc := map[string]string{"node": "node1"}
	for _, seq := range []int{quota, stat} {
		if r := dry(grader.Diagnosis{Class: "cpu-starvation", Location: loc, Evidence: []grader.EvidenceRef{{Terminal: "node1", Seq: seq}}}); Criterion(r, "evidence") == 0 {
			t.Errorf("node1#%d earned no evidence credit: %+v", seq, r)
		}
	}
	if r := dry(grader.Diagnosis{Class: "cpu-starvation", Location: loc, Evidence: []grader.EvidenceRef{{Terminal: "node1", Seq: decoy}}}); Criterion(r, "evidence") != 0 {
		t.Errorf("nvidia-smi -L earned evidence credit: %+v", r)
	}
	if r := dry(grader.Diagnosis{Class: "pcie-downgraded", Location: map[string]string{"node": "node1", "gpu": "0"}, Evidence: []grader.EvidenceRef{{Terminal: "node1", Seq: inLab}}}); r.Passed {
		t.Errorf("blaming the PCIe link passed: %+v", r)
	}
	res, err := l.Grade(context.Background(), grader.Diagnosis{Class: "cpu-starvation", Location: loc, Evidence: []grader.EvidenceRef{{Terminal: "node1", Seq: stat}}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Passed {
		t.Errorf("the right diagnosis with real evidence did not pass: %+v", res)
	}
}

// copyRates reads the table of `commlab gpu pcie` ("  pageable  h2d  256 MiB  6.1  10%")
// into the best GB/s per "memory dir".
func copyRates(out string) map[string]float64 {
	best := map[string]float64{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 6 && (f[0] == "pinned" || f[0] == "pageable") {
			if v, err := strconv.ParseFloat(f[4], 64); err == nil && v > best[f[0]+" "+f[1]] {
				best[f[0]+" "+f[1]] = v
			}
		}
	}
	return best
}

// hostPCIe measures the same copies outside any lab cgroup.
func hostPCIe(t *testing.T) *gpu.PCIeResult {
	t.Helper()
	out, err := exec.Command(Binary(t), "gpu", "pcie", "--sizes", "256M", "--iters", "5", "--json").Output()
	if err != nil {
		t.Fatalf("commlab gpu pcie on the host: %v", err)
	}
	var r gpu.PCIeResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("commlab gpu pcie --json: %v\n%s", err, out)
	}
	return &r
}
