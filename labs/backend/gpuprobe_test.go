//go:build linux

package backend

import (
	"context"
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/internal/testenv"
	"github.com/commlab/commlab/labs/netns"
	"github.com/commlab/commlab/labs/topology"
	"github.com/commlab/commlab/scenarios"
)

// TestProbeVerdict: each way the GPU can be unusable is named in the verdict.
func TestProbeVerdict(t *testing.T) {
	env := []string{"LD_LIBRARY_PATH=/opt/lib:/usr/local/nvidia/lib64"}
	for _, tt := range []struct {
		name string
		r    probeResult
		want []string // empty: usable
	}{
		{"usable", probeResult{Count: 1, Commlab: "/usr/local/bin/commlab"}, nil},
		{"two GPUs needed, one seen", probeResult{Count: 1, Commlab: "/usr/local/bin/commlab"}, []string{"CUDA sees 1 GPU(s) in the lab, the lab needs 2"}},
		{"commlab not reachable", probeResult{Count: 1}, []string{"commlab is not on the learner's PATH"}},
		{"no PyTorch", probeResult{Commlab: "/opt/commlab/commlab", Torch: "ModuleNotFoundError: No module named 'torch'"},
			[]string{"PyTorch does not import in /usr/bin/python3 (ModuleNotFoundError: No module named 'torch')"}},
		{"CUDA refuses, as under the host's /proc", probeResult{CUDA: "cudaGetDeviceCount() ... Error 304: OS call failed or operation not supported on this OS",
			LibCUDA: "libcuda.so.1: cannot open shared object file: No such file or directory", Dev: []string{"/dev/nvidia0: Permission denied"}},
			[]string{"libcuda.so.1 does not load (libcuda.so.1: cannot open shared object file: No such file or directory; LD_LIBRARY_PATH /opt/lib:/usr/local/nvidia/lib64)",
				"device nodes the learner cannot open: /dev/nvidia0: Permission denied", "CUDA does not start: cudaGetDeviceCount() ... Error 304"}},
	} {
		want := 1
		if strings.HasPrefix(tt.name, "two") {
			want = 2
		}
		err := tt.r.verdict(want, "/usr/bin/python3", env)
		if len(tt.want) == 0 {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrGPUUnusable) {
			t.Fatalf("%s: %v is not ErrGPUUnusable", tt.name, err)
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", tt.name, err, w)
			}
		}
	}
}

// TestProbeGPUAsLearner runs the check in a real one-node sandbox as the learner.
// On a host without PyTorch (CI) the verdict must name PyTorch; with PyTorch but no
// GPU, CUDA. It never passes on a host where CUDA sees no GPU.
func TestProbeGPUAsLearner(t *testing.T) {
	testenv.RequireRoot(t, "sandboxes")
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	if err := exec.Command(python, "-c", "import torch; assert torch.cuda.is_available()").Run(); err == nil {
		t.Skip("CUDA works on this host: the GPU check (commlab gpu check) covers it")
	}
	topo, err := topology.Load(scenarios.GPUTopology)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := netns.New(topo, netns.Options{DataDir: t.TempDir(), TTL: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := sb.Up(ctx); err != nil {
		t.Fatal(err)
	}
	defer sb.Down(ctx)
	err = probeGPU(ctx, sb, sb.Plan().Nodes[0].Name, "/nonexistent", python, []string{"CUDA_VISIBLE_DEVICES=GPU-none"}, 1)
	if !errors.Is(err, ErrGPUUnusable) {
		t.Fatalf("probe on a host without a usable GPU: %v", err)
	}
	if !regexp.MustCompile(`PyTorch does not import|CUDA does not start|cannot be run as the learner \(exit status \d+\): \S`).MatchString(err.Error()) {
		t.Errorf("the verdict names no cause: %v", err)
	}
	t.Logf("verdict: %v", err)
}
