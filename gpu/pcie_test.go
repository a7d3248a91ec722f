package gpu

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The bandwidth script's output recorded on the H200 parses, and every
// figure is bytes × iterations / seconds.
func TestParseCopyOutputRecordedH200(t *testing.T) {
	f, err := os.Open("testdata/h200/pcie_bw_raw.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	info, runs, err := ParseCopyOutput(f)
	if err != nil {
		t.Fatal(err)
	}
	if info.Torch != "2.11.0+cu130" || info.Name != "NVIDIA H200" {
		t.Errorf("info %+v", info)
	}
	count := map[string]int{}
	for _, r := range runs {
		count[r.Mode+"/"+r.Dir]++
		want := float64(r.Bytes) * float64(r.Iters) / r.Seconds / 1e9
		if math.Abs(want-r.GBps) > 1e-9*want {
			t.Errorf("%+v: GB/s %v, bytes×iters/seconds gives %v", r, r.GBps, want)
		}
	}
	for _, k := range []string{"pinned/h2d", "pinned/d2h", "pinned/bidir", "pageable/h2d"} {
		if count[k] != 4 {
			t.Errorf("%d %s runs, want 4 (one per size)", count[k], k)
		}
	}
}

// Where PyTorch is missing, the script says so and MeasurePCIe's parser
// returns that sentence as the error (run with this host's own python3).
func TestCopyScriptWithoutTorch(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 here")
	}
	if exec.Command(py, "-c", "import torch").Run() == nil {
		t.Skip("PyTorch is installed here")
	}
	cmd := exec.Command(py, "-", "--sizes", "1M")
	cmd.Stdin = bytes.NewReader(PCIeScript())
	out, _ := cmd.Output()
	_, _, err = ParseCopyOutput(bytes.NewReader(out))
	if err == nil || !strings.Contains(err.Error(), "PyTorch is not installed") {
		t.Fatalf("error %v from output %q", err, out)
	}
}

// The measurement recorded on the H200: the ceiling is the one the link
// NVML reported under load gives, the copies stay under it, and the report
// reads as recorded.
func TestPCIeResultRecordedH200(t *testing.T) {
	data, err := os.ReadFile("testdata/h200/pcie.json")
	if err != nil {
		t.Fatal(err)
	}
	var r PCIeResult
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	ceil, _, err := PCIeCeiling(r.Gen, r.Width)
	if err != nil || math.Abs(ceil-r.CeilingGBps) > 1e-9 {
		t.Fatalf("ceiling %v for Gen%d x%d, recorded %v (%v)", ceil, r.Gen, r.Width, r.CeilingGBps, err)
	}
	for _, dir := range []string{"h2d", "d2h"} {
		best := r.Best("pinned", dir)
		if best <= 0 || best >= r.CeilingGBps {
			t.Errorf("pinned %s: %.1f GB/s against a %.1f GB/s ceiling", dir, best, r.CeilingGBps)
		}
	}
	if pg := r.Best("pageable", "h2d"); pg <= 0 || pg >= r.Best("pinned", "h2d") {
		t.Errorf("pageable %.1f GB/s not below pinned", pg)
	}
	var b bytes.Buffer
	if err := r.Write(&b); err != nil {
		t.Fatal(err)
	}
	golden(t, "pcie.golden", b.Bytes())
}
